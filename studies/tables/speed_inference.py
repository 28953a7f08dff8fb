"""Serving a sentence classifier, strings in and probabilities out: our exported SavedModel (and our Python model)
against ONNX Runtime and the Hugging Face pipeline, MiniLM-L6 and BERT-Base shapes (issue #18).

Weights (bench/inference_setup.py): MiniLM-L6-H384 with a 2-label head drawn from seed 1, and BERT-Base shapes at
transformers' random initialisation (seed 1), as Hugging Face folders. Contenders (bench/inference_contender.py),
each a fresh process with its library's thread defaults, the order reversed every other round, 3 rounds: our
exporter's `classifier/` SavedModel (`python -m bert_tf.export.program --seq_length=128`, loaded with TensorFlow +
tensorflow-text only); our Python path (FastTokenizer + BertClassifierModel in a tf.function); transformers'
text-classification pipeline (torch CPU); ONNX Runtime on the same torch model exported by torch.onnx.export, with
the HF fast tokenizer. Tokenization is included. Batch 1: per-call latency over 300 calls cycling through 256
strings after 20 warm-up, on short strings (SST-2 dev sentences) and on 128-token strings (wiki paragraphs cut to
126 wordpieces); batch 32: sentences/s over at least 8 batches and 20 s of 128-token strings. Each contender's
probabilities on fixed check sets are compared with the HF pipeline's of round 1 (max |Δp|). The smoke plan runs
our Python path on MiniLM only (an export alone takes over a minute). Speed has no paper scale (the paper scale
runs the machine scale's plan).
"""
from __future__ import annotations

from studies import readers, speed_readers
from studies.study import Claim, Column, Run, Study, Table, Versus

CONTENDERS = ("hf_pipeline", "onnxruntime", "ours_python", "ours_saved_model")  # the HF pipeline first: the reference
MODELS = {"minilm": "MiniLM-L6", "bert_base": "BERT-Base"}
MACHINE = ("--calls=300", "--warmup=20", "--b32_min_batches=8", "--b32_min_seconds=20", "--b32_warmup=2",
           "--check_count=16")  # bench_inference.py's defaults
SMOKE = ("--calls=10", "--warmup=2", "--b32_min_batches=1", "--b32_min_seconds=0", "--b32_warmup=1",
         "--check_count=4")
ROUNDS = 3
NAMES = {"ours_saved_model": "ours, classifier SavedModel", "ours_python": "ours, Python (FastTokenizer + model)",
         "hf_pipeline": "HF pipeline (torch)", "onnxruntime": "ONNX Runtime (HF tokenizer)"}
COST = {"minilm": 60, "bert_base": 150}


def setup_runs(model: str, smoke: bool) -> list[Run]:
    """The model's weights, and (machine scale) its SavedModel export and ONNX file."""
    found = [Run(f"weights-{model}", "bench.inference_setup",
                 ("weights", f"--model={model}", "--base={minilm}", "--out={out}"), readers.nothing,
                 ("model.safetensors", "tokenizer.json"), cost_s=2 if model == "minilm" else 30, report=False)]
    if not smoke:
        found += [Run(f"export-{model}", "bert_tf.export.program",
                      (f"--init_checkpoint={{run:weights-{model}}}", "--output_dir={out}", "--seq_length=128",
                       "--overwrite"), readers.nothing, ("classifier/saved_model.pb",), cost_s=120, report=False),
                  Run(f"onnx-{model}", "bench.inference_setup",
                      ("onnx", f"--hf={{run:weights-{model}}}", "--out={out}"),
                      readers.nothing, ("model.onnx",), cost_s=40, report=False)]
    return found


def contender_run(model: str, contender: str, r: int, smoke: bool) -> Run:
    """One contender's process on one model in round `r`; its agreement against the HF pipeline's round 1."""
    paths = {"ours_saved_model": (f"--saved_model={{run:export-{model}}}/classifier",),
             "onnxruntime": (f"--onnx={{run:onnx-{model}}}/model.onnx",)}.get(contender, ())
    first = smoke or (contender == "hf_pipeline" and r == 1)
    reference = () if first else (f"--reference={{run:hf_pipeline-{model}-r1}}",)
    return Run(f"{contender}-{model}-r{r}", "bench.inference_contender",
               (f"--contender={contender}", f"--hf={{run:weights-{model}}}", *paths,
                "--inputs={run:inputs}/inputs.json",
                *(SMOKE if smoke else MACHINE), *reference, "--out={out}"),
               speed_readers.inference, ("result.json",),
               {"model": model, "contender": contender, "round": r}, 20 if smoke else COST[model])


def runs(scale: str, seeds) -> list[Run]:
    smoke = scale == "smoke"
    found = [Run("inputs", "bench.inference_setup", ("inputs", "--shared={shared}", f"--count={64 if smoke else 256}",
                                                     "--out={out}"), readers.nothing, ("inputs.json",), cost_s=2,
                 report=False)]
    models = ("minilm",) if smoke else tuple(MODELS)
    for model in models:
        found += setup_runs(model, smoke)
    for r in range(1, (1 if smoke else ROUNDS) + 1):  # the models interleaved within a round, as the old bench did
        order = ("ours_python",) if smoke else CONTENDERS if r % 2 else CONTENDERS[::-1]
        found += [contender_run(model, contender, r, smoke) for model in models for contender in order]
    return found


def goal(model: str) -> tuple[Versus, ...]:
    """Issue #18's goal, per model: our SavedModel's batch-1 p50 at or below the best peer's, its batch-32
    throughput at least 1.2× the best peer's."""
    peers = ((model, "hf_pipeline"), (model, "onnxruntime"))
    ours = (model, "ours_saved_model")
    return (Versus(f"{MODELS[model]}, batch-1 p50, short", "b1_short_p50_ms", ours, peers, lower_is_better=True),
            Versus(f"{MODELS[model]}, batch-1 p50, 128 tokens", "b1_long_p50_ms", ours, peers, lower_is_better=True),
            Versus(f"{MODELS[model]}, batch-32 throughput (goal ≥ 1.20×)", "b32_sentences_per_s", ours, peers))


def claims(model: str) -> tuple[Claim, ...]:
    """Issue #18's goal against ONNX Runtime, the faster peer in every old run (the ratio lines name the best)."""
    ours, peer = (model, "ours_saved_model"), (model, "onnxruntime")
    return (Claim(f"{MODELS[model]}: our SavedModel's batch-1 p50 on short strings is at or below ONNX Runtime's "
                  "(issue #18)", "b1_short_p50_ms", ours, peer, lower_is_better=True),
            Claim(f"{MODELS[model]}: our SavedModel's batch-1 p50 on 128 tokens is at or below ONNX Runtime's "
                  "(issue #18)", "b1_long_p50_ms", ours, peer, lower_is_better=True))


STUDY = Study(
    name="speed_inference", title="Inference: strings in, probabilities out",
    paper="No paper figure; issue #18's serving comparison",
    about=__doc__.split("\n\n", 1)[1].strip(),
    runs=runs,
    table=Table(rows=("model", "contender"),
                columns=(Column("b1_short_p50_ms", "b1 short p50 ms"), Column("b1_short_p99_ms", "b1 short p99 ms"),
                         Column("b1_long_p50_ms", "b1 128-tok p50 ms"), Column("b1_long_p99_ms", "b1 128-tok p99 ms"),
                         Column("b32_sentences_per_s", "b32 × 128-tok sentences/s"),
                         Column("max_abs_diff_vs_hf_ppm", "max abs Δp vs HF pipeline, millionths", digits=2)),
                claims=claims("minilm") + claims("bert_base"),
                row_names={(m, c): f"{name}: {NAMES[c]}" for m, name in MODELS.items() for c in CONTENDERS},
                versus=goal("minilm") + goal("bert_base")),
    seeds={"smoke": 1, "machine": 1, "paper": 1},
    kind="speed")
