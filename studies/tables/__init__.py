"""The catalog: every declared study, in the order of the report. A study module imports no other study."""
from __future__ import annotations

from studies.study import Study
from studies.tables import glue

STUDIES: tuple[Study, ...] = (glue.STUDY,)


def by_name() -> dict[str, Study]:
    return {study.name: study for study in STUDIES}
