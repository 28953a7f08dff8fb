"""Multiple-choice examples from SWAG's CSV files or users' own JSONL/CSV files.

SWAG (rowanz/swagaf `data/`): train.csv, val.csv and test.csv with the header

    ,video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label

(a leading unnamed index column; test.csv has no label). As the paper and Hugging Face's run_swag
read it: the context is `sent1`, the question is `sent2` (the start of the next sentence, which
each ending completes), the choices are `ending0..3`, the id is `fold-ind`. Columns are found by
their header names, so the index column may be absent.

Users' own data (`--task_name=multiple_choice`): train, dev and test as `.jsonl` or `.csv`:

    {"id": "q1", "context": "...", "question": "...", "choices": ["...", "..."], "label": 1}
    id,context,question,choice0,choice1,...,label

`context` and the choices are required; `question` may be absent (empty), `id` too (the line
number), and `label` (the index of the right choice, from 0) in the test file. Every example has
--num_choices choices. A row that does not fit raises MultipleChoiceDataError naming its file and line.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
from typing import Any, Iterator

from bert_tf.errors import BertTfError
from bert_tf.tasks.glue_data import rows as csv_rows

FORMATS = ("swag", "multiple_choice")
SWAG_FILES = {"train": "train.csv", "eval": "val.csv", "predict": "test.csv"}
OWN_NAMES = {"train": "train", "eval": "dev", "predict": "test"}
OWN_EXTENSIONS = (".jsonl", ".csv")


class MultipleChoiceDataError(BertTfError, ValueError):
    """A data file that is missing or does not have the format (the message names file and line)."""


@dataclasses.dataclass(frozen=True)
class MultipleChoiceExample:
    """One question: its id, context, question (the shared start of every ending), the choices, the
    index of the right one (None when unlabelled) and where it was read ("file:line", for messages)."""

    guid: str
    context: str
    question: str
    endings: tuple[str, ...]
    label: int | None
    source: str = ""


@dataclasses.dataclass(frozen=True)
class CsvColumns:
    """The header names a CSV layout keeps its fields under; choices are `{choice_prefix}0, 1, ...`."""

    context: str
    question: str
    choice_prefix: str
    label: str = "label"
    guid: str = "id"
    required: tuple[str, ...] = ()


SWAG_COLUMNS = CsvColumns("sent1", "sent2", "ending", guid="fold-ind", required=("sent2",))
OWN_COLUMNS = CsvColumns("context", "question", "choice")


def split_file(data_dir: str, fmt: str, split: str) -> str:
    """The file `split` is read from in `data_dir`; MultipleChoiceDataError when it is missing."""
    if fmt == "swag":
        names = [SWAG_FILES[split]]
    else:
        names = [OWN_NAMES[split] + extension for extension in OWN_EXTENSIONS]
    found = [name for name in names if os.path.isfile(os.path.join(data_dir, name))]
    if len(found) > 1:
        raise MultipleChoiceDataError(f"--data_dir: both {' and '.join(found)} in {data_dir}; keep one")
    if not found:
        raise MultipleChoiceDataError(f"--data_dir: no {' or '.join(names)} in {data_dir}")
    return os.path.join(data_dir, found[0])


def read_examples(path: str, fmt: str, num_choices: int) -> list[MultipleChoiceExample]:
    """The examples of one file of format `fmt` ("swag" or "multiple_choice"), in file order."""
    if path.endswith(".jsonl"):
        examples = list(_jsonl_examples(path, num_choices))
    else:
        examples = list(_csv_examples(path, SWAG_COLUMNS if fmt == "swag" else OWN_COLUMNS, num_choices))
    if not examples:
        raise MultipleChoiceDataError(f"{path}: no examples")
    return examples


def _csv_examples(path: str, columns: CsvColumns, num_choices: int) -> Iterator[MultipleChoiceExample]:
    header: list[str] | None = None
    for number, fields in csv_rows(path, ","):
        if header is None:
            header = fields
            index = _csv_header(path, header, columns, num_choices)
            continue
        if not fields:  # a blank line
            continue
        where = f"{path}:{number}"
        if len(fields) != len(header):
            raise MultipleChoiceDataError(f"{where}: {len(fields)} comma-separated fields where the header has "
                                          f"{len(header)}")
        label = fields[index["label"]] if "label" in index else ""
        yield MultipleChoiceExample(
            fields[index["guid"]] if "guid" in index else str(number), fields[index["context"]],
            fields[index["question"]] if "question" in index else "",
            tuple(fields[index[f"choice{i}"]] for i in range(num_choices)),
            _label(where, label.strip() or None, num_choices), where)
    if header is None:
        raise MultipleChoiceDataError(f"{path}: empty file (expected a header row)")


def _csv_header(path: str, header: list[str], columns: CsvColumns, num_choices: int) -> dict[str, int]:
    """Field -> column index from the header; the choice columns must be exactly prefix0..prefix{N-1}."""
    choice = re.compile(re.escape(columns.choice_prefix) + r"(\d+)")
    found = sorted(int(m.group(1)) for m in map(choice.fullmatch, header) if m)
    wanted = [f"{columns.choice_prefix}{i}" for i in range(num_choices)]
    if found != list(range(num_choices)):
        shown = ", ".join(f"{columns.choice_prefix}{i}" for i in found) or "none"
        raise MultipleChoiceDataError(f"{path}: the header's choice columns are {shown}; --num_choices="
                                      f"{num_choices} needs {', '.join(wanted)}")
    for name in (columns.context, *columns.required):
        if name not in header:
            raise MultipleChoiceDataError(f"{path}: no column {name!r}; its header has "
                                          f"{', '.join(map(repr, header))}")
    index = {f"choice{i}": header.index(name) for i, name in enumerate(wanted)}
    for field in ("context", "question", "label", "guid"):
        name = getattr(columns, field)
        if name in header:
            index[field] = header.index(name)
    return index


def _jsonl_examples(path: str, num_choices: int) -> Iterator[MultipleChoiceExample]:
    try:
        with open(path, encoding="utf-8-sig") as f:
            for number, line in enumerate(f, 1):
                if line.strip():
                    yield _json_example(f"{path}:{number}", line, num_choices, str(number))
    except UnicodeDecodeError as e:
        raise MultipleChoiceDataError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None


def _json_example(where: str, line: str, num_choices: int, number: str) -> MultipleChoiceExample:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as e:
        raise MultipleChoiceDataError(f"{where}: not a JSON object ({e.msg} at column {e.colno})") from None
    if not isinstance(record, dict):
        raise MultipleChoiceDataError(f"{where}: not a JSON object but {type(record).__name__}")
    choices = record.get("choices")
    if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
        raise MultipleChoiceDataError(f"{where}: \"choices\" must be a list of strings")
    if len(choices) != num_choices:
        raise MultipleChoiceDataError(f"{where}: {len(choices)} choices, not --num_choices={num_choices}")
    label = record.get("label")
    if label is not None and (isinstance(label, bool) or not isinstance(label, (int, str))):
        raise MultipleChoiceDataError(f"{where}: \"label\" must be the index of the right choice, got {label!r}")
    return MultipleChoiceExample(str(record.get("id", number)), _text(where, record, "context", required=True),
                                 _text(where, record, "question"), tuple(choices),
                                 _label(where, None if label is None else str(label), num_choices), where)


def _text(where: str, record: dict[str, Any], key: str, required: bool = False) -> str:
    value = record.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise MultipleChoiceDataError(f"{where}: {json.dumps(key)} must be a string, got {value!r}")
    return value


def _label(where: str, label: str | None, num_choices: int) -> int | None:
    """The right choice's index from its text ("0".."N-1"); None for no label."""
    if label is None:
        return None
    if not re.fullmatch(r"[0-9]+", label) or int(label) >= num_choices:
        raise MultipleChoiceDataError(f"{where}: label {label!r} is not a choice index 0..{num_choices - 1}")
    return int(label)
