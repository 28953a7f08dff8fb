"""Serving a sentence classifier in each precision: our float32 and bfloat16 SavedModels against ONNX Runtime
float32 and int8 and Hugging Face torch float32, dynamic int8 and bfloat16 autocast (issue #59).

The inference study's method and inputs (studies/tables/speed_inference.py: strings in, probabilities out,
tokenization included, each contender a fresh process with its library's thread defaults, the order reversed
every other round), on the same weights (MiniLM-L6 with a seeded 2-label head; BERT-Base shapes at
transformers' seeded random initialisation). Ours: `bert-tf-export --seq_length=128`, float32 and
`--precision=bfloat16`. ONNX Runtime: the inference study's ONNX file, and that file through `quantize_dynamic`
(int8 weights, activations quantised per batch). torch: the text-classification pipeline, its Linear layers
through `torch.ao.quantization.quantize_dynamic` for int8, under `torch.autocast("cpu", torch.bfloat16)` for
bfloat16. Agreement: every contender's probabilities on fixed check sets against the float32 pipeline's round
1 (max |Δp|; the heads are untrained, so this measures each precision's rounding, not accuracy). Our two
SavedModels run once more under `ONEDNN_MAX_CPU_ISA=AVX2`, the instructions of a CPU without bfloat16 (Zen 2,
Intel before Cooper Lake): what such a user gets. 2 rounds. The smoke plan runs torch's int8 MiniLM for seconds.
"""
from __future__ import annotations

from studies import readers, speed_readers
from studies.study import Column, Run, Study, Table, Versus

MODELS = {"minilm": "MiniLM-L6", "bert_base": "BERT-Base"}
# side: (contender, its flags ({model} filled in), environment)
SIDES = {
    "ours_float32": ("ours_saved_model", ("--saved_model={{run:export-{model}-float32}}/classifier",), {}),
    "ours_bfloat16": ("ours_saved_model", ("--saved_model={{run:export-{model}-bfloat16}}/classifier",), {}),
    "ort_float32": ("onnxruntime", ("--onnx={{run:speed_inference/onnx-{model}}}/model.onnx",), {}),
    "ort_int8": ("onnxruntime", ("--onnx={{run:onnx_int8-{model}}}/model_int8.onnx",), {}),
    "torch_float32": ("hf_pipeline", ("--torch_precision=float32",), {}),
    "torch_int8": ("hf_pipeline", ("--torch_precision=int8",), {}),
    "torch_bfloat16": ("hf_pipeline", ("--torch_precision=bfloat16",), {}),
    "ours_float32_avx2": ("ours_saved_model", ("--saved_model={{run:export-{model}-float32}}/classifier",),
                          {"ONEDNN_MAX_CPU_ISA": "AVX2"}),
    "ours_bfloat16_avx2": ("ours_saved_model", ("--saved_model={{run:export-{model}-bfloat16}}/classifier",),
                           {"ONEDNN_MAX_CPU_ISA": "AVX2"}),
}
REFERENCE = "torch_float32"
NAMES = {"ours_float32": "ours, SavedModel float32", "ours_bfloat16": "ours, SavedModel bfloat16",
         "ort_float32": "ONNX Runtime float32", "ort_int8": "ONNX Runtime int8 (quantize_dynamic)",
         "torch_float32": "HF torch float32", "torch_int8": "HF torch int8 (quantize_dynamic)",
         "torch_bfloat16": "HF torch bfloat16 (autocast)",
         "ours_float32_avx2": "ours, SavedModel float32, AVX2 only", "ours_bfloat16_avx2": "ours, SavedModel "
         "bfloat16, AVX2 only (emulated)"}
MACHINE = ("--calls=300", "--warmup=20", "--b32_min_batches=8", "--b32_min_seconds=20", "--b32_warmup=2",
           "--check_count=16")
SMOKE = ("--calls=10", "--warmup=2", "--b32_min_batches=1", "--b32_min_seconds=0", "--b32_warmup=1",
         "--check_count=4")
ROUNDS = 2
COST = {"minilm": 60, "bert_base": 150}


def setup_runs(model: str) -> list[Run]:
    """Our float32 and bfloat16 exports of the inference study's weights, and its ONNX file quantised."""
    found = [Run(f"export-{model}-{precision}", "bert_tf.export.program",
                 (f"--init_checkpoint={{run:speed_inference/weights-{model}}}", "--output_dir={out}",
                  "--seq_length=128", "--saved_models=task", f"--precision={precision}", "--overwrite"),
                 readers.nothing, ("classifier/saved_model.pb",), cost_s=60 if model == "minilm" else 120,
                 report=False)
             for precision in ("float32", "bfloat16")]
    return found + [Run(f"onnx_int8-{model}", "bench.inference_setup",
                        ("onnx_int8", f"--onnx={{run:speed_inference/onnx-{model}}}/model.onnx", "--out={out}"),
                        readers.nothing, ("model_int8.onnx",), cost_s=30, report=False)]


def contender_run(model: str, side: str, r: int, smoke: bool) -> Run:
    contender, flags, env = SIDES[side]
    first = smoke or (side == REFERENCE and r == 1)
    reference = () if first else (f"--reference={{run:{REFERENCE}-{model}-r1}}",)
    return Run(f"{side}-{model}-r{r}", "bench.inference_contender",
               (f"--contender={contender}", f"--hf={{run:speed_inference/weights-{model}}}",
                *(flag.format(model=model) for flag in flags), "--inputs={run:speed_inference/inputs}/inputs.json",
                *(SMOKE if smoke else MACHINE), *reference, "--out={out}"),
               speed_readers.inference, ("result.json",), {"model": model, "side": side, "round": r},
               20 if smoke else COST[model], env=env)


def runs(scale: str, seeds) -> list[Run]:
    if scale == "smoke":
        return [contender_run("minilm", "torch_int8", 1, True)]
    found = [run for model in MODELS for run in setup_runs(model)]
    order = (REFERENCE,) + tuple(side for side in SIDES if side != REFERENCE)
    for r in range(1, ROUNDS + 1):
        sides = order if r % 2 else (REFERENCE,) + order[:0:-1]  # the reference first: the others compare to it
        found += [contender_run(model, side, r, False) for model in MODELS for side in sides]
    return found


def goals(model: str) -> tuple[Versus, ...]:
    """Issue #59's bfloat16 goal (batch 32 at least 1.3× the best float32 peer on a CPU with bfloat16) and the
    batch-1 comparisons its int8 goals name, for our bfloat16 SavedModel until an int8 one exists."""
    name, ours = MODELS[model], (model, "ours_bfloat16")
    float32_peers = ((model, "ort_float32"), (model, "torch_float32"))
    return (Versus(f"{name}, bfloat16 batch-32 vs the best float32 peer (goal ≥ 1.30×)", "b32_sentences_per_s",
                   ours, float32_peers),
            Versus(f"{name}, bfloat16 batch-32 vs ONNX Runtime int8", "b32_sentences_per_s", ours,
                   ((model, "ort_int8"),)),
            Versus(f"{name}, bfloat16 batch-1 p50 short vs ONNX Runtime float32", "b1_short_p50_ms", ours,
                   ((model, "ort_float32"),), lower_is_better=True),
            Versus(f"{name}, bfloat16 vs float32, ours, batch 32", "b32_sentences_per_s", ours,
                   ((model, "ours_float32"),)))


STUDY = Study(
    name="speed_precision", title="Serving in each precision: float32, bfloat16 and int8",
    paper="No paper figure; issue #59's precision comparison",
    about=__doc__.split("\n\n", 1)[1].strip(),
    runs=runs,
    table=Table(rows=("model", "side"),
                columns=(Column("b1_short_p50_ms", "b1 short p50 ms"), Column("b1_short_p99_ms", "b1 short p99 ms"),
                         Column("b1_long_p50_ms", "b1 128-tok p50 ms"), Column("b1_long_p99_ms", "b1 128-tok p99 ms"),
                         Column("b32_sentences_per_s", "b32 × 128-tok sentences/s"),
                         Column("max_abs_diff_vs_hf_ppm", "max |Δp| vs torch float32, millionths", digits=0)),
                row_names={(m, side): f"{name}: {NAMES[side]}" for m, name in MODELS.items() for side in SIDES},
                versus=goals("minilm") + goals("bert_base")),
    seeds={"smoke": 1, "machine": 1, "paper": 1},
    kind="speed")
