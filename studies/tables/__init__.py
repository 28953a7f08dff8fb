"""The catalog: every module of this package declares one study as STUDY; the report orders them by ORDER, then
by name. A study module imports no other study."""
from __future__ import annotations

import importlib
import pkgutil

from studies.study import Study

ORDER = ("pretraining", "glue", "squad", "swag", "table5", "table6", "table7", "table8", "pretraining_helps")


def _discover() -> tuple[Study, ...]:
    found = [importlib.import_module(f"{__name__}.{m.name}").STUDY for m in pkgutil.iter_modules(__path__)
             if not m.name.startswith("_")]
    rank = {name: i for i, name in enumerate(ORDER)}
    return tuple(sorted(found, key=lambda s: (s.kind, rank.get(s.name, len(ORDER)), s.name)))


STUDIES: tuple[Study, ...] = _discover()


def by_name() -> dict[str, Study]:
    return {study.name: study for study in STUDIES}
