"""bench/results/bench_ablations_d10/{mrpc,sst2,squad}-VARIANT-sSEED.json -> the table5 study's records."""
from __future__ import annotations

from studies.migrations._ablations import finetuning
from studies.tables.table5 import ROWS, TASKS


def migrate(results: str) -> list[dict]:
    return finetuning(results, "table5", tuple(TASKS), ROWS)
