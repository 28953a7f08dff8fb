"""bench/results/bench_ablations_d10/{mrpc,ner_ft,ner_fb}-VARIANT-sSEED.json -> the table8 study's records."""
from __future__ import annotations

from studies.migrations._ablations import finetuning
from studies.tables.table8 import ROWS, TASKS


def migrate(results: str) -> list[dict]:
    return finetuning(results, "table8", tuple(TASKS), ROWS)
