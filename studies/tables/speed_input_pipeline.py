"""What the pre-training input pipeline's safety checks cost: records per second with and without them (issue #17).

Two contenders (bench/input_pipeline_contender.py), each a fresh process, one after another, the order reversed
every other round, 3 rounds: "plain", TensorFlow's TFRecordDataset interleaved over the files, shuffled, batched and
parsed with the records' feature spec, no checks; "ours", `pretraining_dataset` as run_pretraining reads (the same
interleave, shuffle buffer, batch and parse, plus each file's framed bytes counted per chunk of 256 records and the
ids and lengths checked per batch). Files: 8 copies of the original program's `default_uncased` golden records
(shared data), batch 32, seq 128, 20 predictions; records/s over 600 timed batches after 20 warm-up. Either rate is
orders of magnitude above any BERT model's step rate. Speed has no paper scale (the paper scale runs the machine
scale's plan).
"""
from __future__ import annotations

from studies import speed_readers
from studies.study import Column, Run, Study, Table, Versus

RECORDS = "{shared}/golden/create_pretraining_data/default_uncased/default_uncased.tfrecord"
MACHINE = {"rounds": 3, "copies": 8, "batches": 600, "warmup": 20}  # bench_input_pipeline.py's defaults
SMOKE = {"rounds": 1, "copies": 2, "batches": 20, "warmup": 2}
NAMES = {"plain": "TFRecordDataset + parse, no checks", "ours": "ours: `pretraining_dataset` (with its checks)"}


def runs(scale: str, seeds) -> list[Run]:
    size = SMOKE if scale == "smoke" else MACHINE
    found = []
    for r in range(1, size["rounds"] + 1):
        for contender in ("plain", "ours") if r % 2 else ("ours", "plain"):
            found.append(Run(f"{contender}-r{r}", "bench.input_pipeline_contender",
                             (f"--contender={contender}", f"--records={RECORDS}", f"--copies={size['copies']}",
                              f"--batches={size['batches']}", f"--warmup={size['warmup']}", "--out={out}"),
                             speed_readers.figures(speed_readers.INPUT_PIPELINE), ("result.json",),
                             {"contender": contender, "round": r}, 8 if scale == "smoke" else 40))
    return found


STUDY = Study(
    name="speed_input_pipeline", title="Pre-training input pipeline: what the safety checks cost",
    paper="No paper figure; issue #17's cost of the input pipeline's checks",
    about=__doc__.split("\n\n", 1)[1].strip(),
    runs=runs,
    table=Table(rows=("contender",), columns=(Column("records_per_s", "records/s", digits=0),),
                row_names={(k,): v for k, v in NAMES.items()},
                versus=(Versus("records/s (the checks' cost: below 1 is slower than no checks)", "records_per_s",
                               ("ours",), (("plain",),)),)),
    seeds={"smoke": 1, "machine": 1, "paper": 1},
    kind="speed")
