"""A served model under load: our exported classifier and SQuAD SavedModels called by concurrent clients for
minutes, then sent hostile requests (issue #60).

The host (bench/serving_soak.py) is one process that loads a task SavedModel with `tf.saved_model.load` and
calls its `serving_default` signature, on TensorFlow and tensorflow-text alone, as TF Serving or a Python web
server would. Models: MiniLM-L6 with a seeded 2-label head (the inference study's weights, exported here at
seq_length 128) and with a seeded span head (exported here as a SQuAD v1.1 model at seq_length 384, doc_stride
128); their heads are untrained: this study measures the host, not answers. Requests: SST-2 dev sentences
(classifier) and those sentences as questions over 126-wordpiece wiki paragraphs (SQuAD). First one client
sweeps batch sizes 1, 8 and 32 (items/s); then 4 client threads send requests of 1, 2, 4 and 8 rows for 5
minutes: resident memory (VmRSS) each second, its least-squares slope after the first 30 s window and over the
second half (a leak holds its slope, a warm-up flattens), p50/p99 per 30 s window (drift: the slowest window's
p50 over the fastest's), requests and rows per second; then six hostile requests (empty strings, a 1 MB string,
invalid UTF-8 bytes, an int32 tensor, a 2-D string tensor, 10,000 rows), each followed by a good request whose
answer is compared with its answer before them. "Hostile handled" counts the hostile requests that ended in an
answer or an error for that request alone (the host lives on) within 300 s; the per-request outcomes and times
are in each run's result.json. The smoke plan serves the original's tiny classifier for seconds.
"""
from __future__ import annotations

from studies import readers, speed_readers
from studies.study import Column, Run, Study, Table

MACHINE = ("--clients=4", "--soak_seconds=300", "--window_seconds=30", "--sweep_seconds=10",
           "--batch_sizes=1,8,32")
SMOKE = ("--clients=2", "--soak_seconds=4", "--window_seconds=2", "--sweep_seconds=0.2", "--batch_sizes=1,8",
         "--hostile_timeout=120")
NAMES = {("minilm", "classifier"): "MiniLM-L6 classifier (seq 128)", ("minilm", "squad"): "MiniLM-L6 SQuAD (seq 384)",
         ("tiny", "classifier"): "tiny classifier (smoke)"}
TINY_CLASSIFIER = "{shared}/checkpoints/tf1_tiny_classifier_from_original_bert_code"


def exports(smoke: bool) -> list[Run]:
    """The SavedModels served: the tiny classifier (smoke), else MiniLM's classifier (the inference study's
    weights) and SQuAD model, exported by this commit's exporter."""
    if smoke:
        return [Run("export-tiny", "bert_tf.export.program",
                    (f"--init_checkpoint={TINY_CLASSIFIER}", "--output_dir={out}", "--seq_length=48",
                     "--saved_models=task", "--overwrite"), readers.nothing, ("classifier/saved_model.pb",),
                    cost_s=30, report=False)]
    return [Run("export-minilm-classifier", "bert_tf.export.program",
                ("--init_checkpoint={run:speed_inference/weights-minilm}", "--output_dir={out}", "--seq_length=128",
                 "--saved_models=task", "--overwrite"), readers.nothing, ("classifier/saved_model.pb",), cost_s=60,
                report=False),
            Run("weights-minilm-span", "bench.inference_setup",
                ("weights", "--model=minilm", "--head=span", "--base={minilm}", "--out={out}"), readers.nothing,
                ("model.safetensors",), cost_s=2, report=False),
            Run("export-minilm-squad", "bert_tf.export.program",
                ("--init_checkpoint={run:weights-minilm-span}", "--output_dir={out}", "--seq_length=384",
                 "--saved_models=task", "--overwrite"), readers.nothing, ("squad/saved_model.pb",), cost_s=150,
                report=False)]


def soak_run(model: str, task: str, folder: str, smoke: bool) -> Run:
    return Run(f"soak-{model}-{task}", "bench.serving_soak",
               (f"--task={task}", f"--saved_model={folder}", "--inputs={run:speed_inference/inputs}/inputs.json",
                *(SMOKE if smoke else MACHINE), "--out={out}"),
               speed_readers.serving_soak, ("result.json",), {"model": model, "task": task},
               cost_s=40 if smoke else 420)


def runs(scale: str, seeds) -> list[Run]:
    smoke = scale == "smoke"
    if smoke:
        return exports(True) + [soak_run("tiny", "classifier", "{run:export-tiny}/classifier", True)]
    return exports(False) + [soak_run("minilm", "classifier", "{run:export-minilm-classifier}/classifier", False),
                             soak_run("minilm", "squad", "{run:export-minilm-squad}/squad", False)]


STUDY = Study(
    name="serving_soak", title="A served model under load: memory, latency over time, hostile requests",
    paper="No paper figure; issue #60's serving soak",
    about=__doc__.split("\n\n", 1)[1].strip(),
    runs=runs,
    table=Table(rows=("model", "task"),
                columns=(Column("rss_slope_mib_per_min", "RSS slope MiB/min", digits=2),
                         Column("rss_late_slope_mib_per_min", "2nd-half RSS slope", digits=2),
                         Column("rss_peak_mib", "peak RSS MiB", digits=0),
                         Column("p50_ms", "p50 ms"), Column("p99_ms", "p99 ms"),
                         Column("p50_drift", "p50 drift ×", digits=2),
                         Column("requests_per_s", "requests/s"), Column("rows_per_s", "rows/s"),
                         Column("b1_items_per_s", "b1 rows/s"), Column("b8_items_per_s", "b8 rows/s"),
                         Column("b32_items_per_s", "b32 rows/s"),
                         Column("errors", "failed good requests", digits=0),
                         Column("hostile_handled", "hostile handled (of 6)", digits=0),
                         Column("hostile_good_after_max_abs_diff", "max Δ after hostile", digits=7)),
                row_names=NAMES),
    seeds={"smoke": 1, "machine": 1, "paper": 1},
    kind="speed")
