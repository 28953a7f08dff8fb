"""Classifier examples read through TensorFlow Datasets (`--tfds_name=glue/mrpc`), for users who
have the data prepared there.

A GLUE config of tfds holds the rows of GLUE's tsv files, so it yields the `InputExample`s the tsv
path does: our split names mapped to tfds's, its text features as text_a/text_b, its ClassLabel ints
turned back into the tsv files' label strings, and guids from its `idx` feature (for test rows, the
index GLUE's submission files want).

Nothing is ever downloaded: the lookup is `tfds.builder(name, data_dir=...)` on an already prepared
`<data_dir>/<name>/<version>/` (what `tfds.load(name, data_dir=..., download=False)` reads), and an
unprepared one is an error saying to run `tfds build` where there is internet. The first half
(prepared builder, split records, split files) knows nothing of GLUE, for SQuAD and CoNLL to reuse.
tensorflow-datasets is the optional extra `bert_tf[tfds]`, imported only when a function needs it.
"""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Callable, Iterator

import numpy as np

from bert_tf.errors import BertTfError
from bert_tf.tasks.glue_data import GLUE, ClassifierDataError, InputExample, TextFormat


class TfdsDataError(BertTfError, ValueError):
    """A TensorFlow Datasets name, data_dir or split that cannot be read (the message says what to do)."""


# --- Any prepared tfds dataset -------------------------------------------------------------------

READ_BATCH = 4096


def _tfds():
    """The tensorflow_datasets module, or the error naming the extra that installs it."""
    try:
        import tensorflow_datasets
    except ImportError:
        raise TfdsDataError("reading TensorFlow Datasets needs tensorflow-datasets: "
                            "pip install 'bert_tf[tfds]'") from None
    return tensorflow_datasets


def prepared_builder(name: str, data_dir: str | None):
    """The tfds builder of `name` ("glue/mrpc", "squad/v1.1:3.0.0") whose files are already prepared
    under `data_dir` (None: tfds's default, $TFDS_DATA_DIR or ~/tensorflow_datasets). It never
    downloads or prepares: an unprepared dataset is an error saying how to prepare it."""
    tfds = _tfds()
    try:
        builder = tfds.builder(name, data_dir=data_dir)
    except (ValueError, AssertionError) as e:  # DatasetNotFoundError, unknown config; unknown version
        raise TfdsDataError(f"TensorFlow Datasets has no dataset {name!r}: {' '.join(str(e).split())}") from None
    if not builder.is_prepared():
        raise TfdsDataError(
            f"TensorFlow Datasets {name!r} is not prepared in {_where(data_dir)}: no {builder.data_dir}/"
            f"dataset_info.json{_other_versions(builder, name)}. Prepare it where there is internet "
            f"(`tfds build {name.split(':')[0]} --data_dir=DIR`) and pass that DIR; nothing is downloaded "
            "at run time")
    return builder


def _where(data_dir: str | None) -> str:
    return f"data_dir {data_dir}" if data_dir else "tfds's default data_dir ($TFDS_DATA_DIR or ~/tensorflow_datasets)"


def _other_versions(builder, name: str) -> str:
    """A hint naming the versions of this dataset that are prepared there (an older `tfds build`)."""
    folder = builder.data_path.parent
    versions = sorted(p.name for p in folder.iterdir() if (p / "dataset_info.json").exists()) \
        if folder.is_dir() else []
    return f" (prepared there: {', '.join(name.split(':')[0] + ':' + v for v in versions)})" if versions else ""


def split_info(builder, split: str):
    """The SplitInfo of `split` in a prepared builder; an unknown split names the ones it has."""
    splits = builder.info.splits
    if split not in splits:
        raise TfdsDataError(f"TensorFlow Datasets {builder.info.full_name} in {builder.data_dir} has no split "
                            f"{split!r}; it has {', '.join(sorted(splits.keys()))}")
    return splits[split]


def split_files(builder, split: str) -> list[str]:
    """The prepared data files of a split (what a cache key hashes, so that changed data is seen)."""
    return [str(path) for path in split_info(builder, split).filepaths]


def read_split(builder, split: str) -> list[dict[str, Any]]:
    """Every record of a prepared split in file order, as dicts of numpy scalars (text as bytes),
    lists (variable-length features) and dicts (nested features). Read in ragged batches: one
    tf.data element per record costs ~4x the time, and tfds's own batching pads variable lengths."""
    import tensorflow as tf

    split_info(builder, split)
    dataset = builder.as_dataset(split=split, shuffle_files=False).ragged_batch(READ_BATCH)
    records = []
    for batch in _tfds().as_numpy(dataset):
        columns = _columns(batch, tf.RaggedTensor)
        records.extend(_record(columns, i) for i in range(_length(columns)))
    return records


def _columns(batch: Any, ragged: type) -> Any:
    """A batch's features as lists of per-record values (nested dicts kept)."""
    if isinstance(batch, dict):
        return {key: _columns(value, ragged) for key, value in batch.items()}
    return batch.to_list() if isinstance(batch, ragged) else list(batch)


def _length(columns: Any) -> int:
    return _length(next(iter(columns.values()))) if isinstance(columns, dict) else len(columns)


def _record(columns: Any, i: int) -> Any:
    if isinstance(columns, dict):
        return {key: _record(value, i) for key, value in columns.items()}
    return columns[i]


# --- GLUE ----------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class GlueConfig:
    """A tfds GLUE config: our task (a key of glue_data.GLUE) and its text features."""

    task: str
    text_a: str
    text_b: str | None


GLUE_CONFIGS: dict[str, GlueConfig] = {
    "cola": GlueConfig("cola", "sentence", None),
    "sst2": GlueConfig("sst-2", "sentence", None),
    "mrpc": GlueConfig("mrpc", "sentence1", "sentence2"),
    "stsb": GlueConfig("sts-b", "sentence1", "sentence2"),
    "qqp": GlueConfig("qqp", "question1", "question2"),
    "mnli": GlueConfig("mnli", "premise", "hypothesis"),
    "qnli": GlueConfig("qnli", "question", "sentence"),
    "rte": GlueConfig("rte", "sentence1", "sentence2"),
    "wnli": GlueConfig("wnli", "sentence1", "sentence2"),
}
SPLITS = {"train": "train", "eval": "validation", "predict": "test"}
MNLI_SPLITS = {"train": "train", "eval": "validation_matched", "eval_mismatched": "validation_mismatched",
               "predict": "test_matched", "predict_mismatched": "test_mismatched"}
UNLABELLED = -1  # tfds's GLUE label of test rows


def _glue_config(tfds_name: str) -> GlueConfig:
    """The GLUE config of "glue/<config>" (a ":<version>" suffix allowed); others list the supported names."""
    dataset, _, config = tfds_name.split(":")[0].partition("/")
    if dataset != "glue" or config not in GLUE_CONFIGS:
        raise ClassifierDataError(f"--tfds_name={tfds_name}: not a supported GLUE dataset; use one of "
                                  f"{', '.join('glue/' + c for c in GLUE_CONFIGS)}")
    return GLUE_CONFIGS[config]


def glue_task_of(tfds_name: str) -> str:
    """Our GLUE task (a key of glue_data.GLUE) of a tfds name: "glue/mrpc" -> "mrpc", "glue/sst2" -> "sst-2"."""
    return _glue_config(tfds_name).task


def _tfds_split(tfds_name: str, split: str) -> str:
    """tfds's name of our split: eval -> validation, predict -> test (MNLI: _matched, _mismatched)."""
    splits = MNLI_SPLITS if glue_task_of(tfds_name) == "mnli" else SPLITS
    if split not in splits:
        raise ClassifierDataError(f"--tfds_name={tfds_name}: no split {split!r}; it has {', '.join(splits)}")
    return splits[split]


def read_tfds_examples(tfds_name: str, split: str, data_dir: str | None) -> list[InputExample]:
    """The examples of our `split` of a prepared tfds GLUE dataset as the tsv path reads them: same
    texts and label strings, in the order of tfds's `idx` (the files' row order; tfds's writer
    shuffles records), guid "<split>-<idx>" (for test rows, the tsv files' index column)."""
    config, tfds_split = _glue_config(tfds_name), _tfds_split(tfds_name, split)
    with _as_classifier_error():
        builder = prepared_builder(tfds_name, data_dir)
        records = read_split(builder, tfds_split)
    to_label = _label_converter(GLUE[config.task], builder.info.features["label"])
    records.sort(key=lambda record: int(record["idx"]))
    return [InputExample(f"{split}-{int(r['idx'])}", _text(r[config.text_a]),
                         _text(r[config.text_b]) if config.text_b else None, to_label(r["label"]))
            for r in records]


def tfds_input_files(tfds_name: str, split: str, data_dir: str | None) -> list[str]:
    """The prepared data files our `split` of a tfds GLUE dataset is read from."""
    tfds_split = _tfds_split(tfds_name, split)
    with _as_classifier_error():
        return split_files(prepared_builder(tfds_name, data_dir), tfds_split)


@contextlib.contextmanager
def _as_classifier_error() -> Iterator[None]:
    """Re-raises a TfdsDataError as the classifier's ClassifierDataError (same message)."""
    try:
        yield
    except TfdsDataError as e:
        raise ClassifierDataError(str(e)) from None


def _text(value: bytes) -> str:
    return value.decode("utf-8")


def _label_converter(fmt: TextFormat, feature) -> Callable[[Any], str | None]:
    """tfds label -> our label string; -1 (test rows) -> None. GLUE's tsv labels are either the tfds
    class names themselves (MNLI, QNLI, RTE: mapped by name, as tfds orders MNLI's differently) or
    integers that tfds's builder parsed with int() into the class index (CoLA, SST-2, MRPC, QQP,
    WNLI: mapped by index). STS-B's float32 score becomes a decimal string (_score_text)."""
    if fmt.labels is None:
        return lambda value: None if value == UNLABELLED else _score_text(value)
    names = list(feature.names)
    ours = names if set(names) <= set(fmt.labels) else [str(i) for i in range(len(names))]
    if not set(ours) <= set(fmt.labels):
        raise ClassifierDataError(f"TensorFlow Datasets labels {', '.join(names)} do not match the task's "
                                  f"labels {', '.join(fmt.labels)}")
    return lambda value: None if value == UNLABELLED else ours[int(value)]


def _score_text(value: np.float32) -> str:
    """The shortest decimal that reads back as the same float32: the tsv's own number where it has at
    most 6 significant digits ("3.8" for "3.800"); tfds keeps STS-B scores as float32, so a longer one
    ("2.11111111111111") comes back as its float32 ("2.1111112"), which the float features hold anyway."""
    text = str(np.float32(value))
    return text if np.float32(float(text)) == np.float32(value) else repr(float(value))
