"""--tfds_name: GLUE read through TensorFlow Datasets gives the examples of the tsv path.

tensorflow-datasets' own GLUE builder prepares all nine configs offline from the shared tsv files
(tests/tfds_fixture.py says how); `read_tfds_examples` must then yield, split by split, what
`glue_data.read_examples` reads from those very files. The network is shut for the whole module.
"""
from __future__ import annotations

import os
import pathlib
import socket
import subprocess
import sys
from typing import Iterator

import numpy as np
import pytest

from shared_data import shared_path
from tfds_fixture import build_local_glue

from bert_tf.tasks import tfds_data
from bert_tf.tasks.glue_data import GLUE, ClassifierDataError, read_examples

pytest.importorskip("tensorflow_datasets")

REPO = pathlib.Path(__file__).resolve().parent.parent
FOLDERS = {"cola": "CoLA", "sst2": "SST-2", "mrpc": "MRPC", "stsb": "STS-B", "qqp": "QQP", "mnli": "MNLI",
           "qnli": "QNLI", "rte": "RTE", "wnli": "WNLI"}
CASES = [(config, split) for config in FOLDERS for split in GLUE[tfds_data.GLUE_CONFIGS[config].task].files]


def _no_network(*args, **kwargs):
    raise OSError("network access in an offline test")


@pytest.fixture(scope="module")
def tfds_dir(tmp_path_factory) -> Iterator[str]:
    """A tfds data_dir holding glue/<config>/2.0.0 for all nine configs, prepared with no network."""
    data_dir = tmp_path_factory.mktemp("tensorflow_datasets")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", _no_network)
        patch.setattr(socket, "getaddrinfo", _no_network)
        for config in FOLDERS:
            build_local_glue(config, data_dir)
        yield str(data_dir)


def _tsv_examples(config: str, split: str):
    task = tfds_data.glue_task_of(f"glue/{config}")
    return read_examples(str(shared_path("glue", FOLDERS[config])), GLUE[task], split)


def _label(label: str | None, regression: bool):
    return np.float32(float(label)) if regression and label is not None else label


@pytest.mark.parametrize("config,split", CASES)
def test_each_glue_split_read_through_tfds_has_the_tsv_files_examples_in_their_order(tfds_dir, config, split):
    ours = tfds_data.read_tfds_examples(f"glue/{config}", split, tfds_dir)
    tsv = _tsv_examples(config, split)
    regression = GLUE[tfds_data.glue_task_of(f"glue/{config}")].labels is None
    assert len(ours) == len(tsv) > 0
    assert [(e.text_a, e.text_b) for e in ours] == [(e.text_a, e.text_b) for e in tsv]
    assert [_label(e.label, regression) for e in ours] == [_label(e.label, regression) for e in tsv]
    if split.startswith("predict"):  # submission files index test rows by the tsv's index column
        assert [e.guid for e in ours] == [e.guid for e in tsv]


def test_mrpc_is_complete_and_its_labels_are_the_tsv_strings(tfds_dir):
    counts = {split: len(tfds_data.read_tfds_examples("glue/mrpc", split, tfds_dir)) for split in GLUE["mrpc"].files}
    assert counts == {"train": 3667, "eval": 408, "predict": 1725}  # train: 3,668 less the pair the shared file lacks
    labels = {e.label for e in tfds_data.read_tfds_examples("glue/mrpc", "eval", tfds_dir)}
    assert labels == {"0", "1"}


def test_sts_b_scores_are_the_tsv_numbers_wherever_float32_holds_them(tfds_dir):
    for split in ("train", "eval"):
        for ours, tsv in zip(tfds_data.read_tfds_examples("glue/stsb", split, tfds_dir), _tsv_examples("stsb", split)):
            digits = len(tsv.label.replace(".", "").strip("0"))
            if digits <= 6:
                assert float(ours.label) == float(tsv.label)
            else:  # e.g. 2.11111111111111: tfds stores float32
                assert np.float32(float(ours.label)) == np.float32(float(tsv.label))


def test_mnli_matched_and_mismatched_sets_are_read_from_their_own_tfds_splits(tfds_dir):
    expected = {"train": "train", "eval": "validation_matched", "eval_mismatched": "validation_mismatched",
                "predict": "test_matched", "predict_mismatched": "test_mismatched"}
    for split, tfds_split in expected.items():
        files = tfds_data.tfds_input_files("glue/mnli", split, tfds_dir)
        assert files and all(os.path.isfile(f) and os.path.basename(f).startswith(f"glue-{tfds_split}.")
                             for f in files)
    matched = tfds_data.read_tfds_examples("glue/mnli", "eval", tfds_dir)
    mismatched = tfds_data.read_tfds_examples("glue/mnli", "eval_mismatched", tfds_dir)
    assert matched != mismatched


def test_input_files_are_the_prepared_files_of_that_split_under_the_data_dir(tfds_dir):
    files = {split: tfds_data.tfds_input_files("glue/mrpc", split, tfds_dir) for split in GLUE["mrpc"].files}
    everything = [f for split_files in files.values() for f in split_files]
    assert len(set(everything)) == len(everything)
    assert all(f.startswith(os.path.join(tfds_dir, "glue", "mrpc", "2.0.0", "glue-")) for f in everything)


def test_glue_task_of_names_our_task_for_every_tfds_glue_config():
    assert {c: tfds_data.glue_task_of(f"glue/{c}") for c in FOLDERS} == {
        "cola": "cola", "sst2": "sst-2", "mrpc": "mrpc", "stsb": "sts-b", "qqp": "qqp", "mnli": "mnli",
        "qnli": "qnli", "rte": "rte", "wnli": "wnli"}
    assert tfds_data.glue_task_of("glue/mrpc:2.0.0") == "mrpc"
    assert set(tfds_data.GLUE_CONFIGS[c].task for c in FOLDERS) <= set(GLUE)


@pytest.mark.parametrize("name", ["glue/ax", "squad/v1.1", "mrpc", "glue/mnli_matched"])
def test_an_unsupported_name_is_one_error_listing_the_supported_ones(name):
    with pytest.raises(ClassifierDataError, match=r"not a supported GLUE dataset; use one of glue/cola, .*glue/wnli$"):
        tfds_data.glue_task_of(name)


def test_an_unprepared_dataset_says_where_it_looked_and_to_run_tfds_build_and_prepares_nothing(tmp_path):
    with pytest.raises(ClassifierDataError) as error:
        tfds_data.read_tfds_examples("glue/rte", "eval", str(tmp_path))
    message = str(error.value)
    assert "'glue/rte' is not prepared in data_dir " + str(tmp_path) in message
    assert "tfds build glue/rte --data_dir=DIR" in message and "\n" not in message
    assert list(tmp_path.iterdir()) == []  # nothing downloaded or prepared
    with pytest.raises(ClassifierDataError, match="not prepared"):
        tfds_data.tfds_input_files("glue/rte", "eval", str(tmp_path))


def test_another_prepared_version_is_named_in_the_error(tfds_dir):
    with pytest.raises(ClassifierDataError, match=r"glue/mrpc:1\.0\.0' is not prepared .*\(prepared there: "
                                                  r"glue/mrpc:2\.0\.0\)"):
        tfds_data.read_tfds_examples("glue/mrpc:1.0.0", "eval", tfds_dir)


@pytest.mark.parametrize("name,reason", [("glue/mrpc:9.9.9", "cannot be loaded at version 9.9.9"),
                                         ("glue/mrpc:x", "builder name string must be of the following format")])
def test_a_version_tfds_does_not_know_is_one_error_line(tfds_dir, name, reason):
    with pytest.raises(ClassifierDataError, match=f"TensorFlow Datasets has no dataset '{name}': .*{reason}") as error:
        tfds_data.read_tfds_examples(name, "eval", tfds_dir)
    assert "\n" not in str(error.value)


def test_a_split_the_task_lacks_is_an_error(tfds_dir):
    with pytest.raises(ClassifierDataError, match="glue/mrpc: no split 'eval_mismatched'; it has train, eval, predict"):
        tfds_data.read_tfds_examples("glue/mrpc", "eval_mismatched", tfds_dir)


def test_a_missing_split_in_the_prepared_files_names_the_ones_there(tfds_dir):
    builder = tfds_data.prepared_builder("glue/mrpc", tfds_dir)
    with pytest.raises(tfds_data.TfdsDataError, match="has no split 'dev'; it has test, train, validation"):
        tfds_data.split_files(builder, "dev")


def test_without_tensorflow_datasets_the_error_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "tensorflow_datasets", None)
    with pytest.raises(ClassifierDataError, match=r"pip install 'bert_tf\[tfds\]'"):
        tfds_data.read_tfds_examples("glue/mrpc", "eval", str(tmp_path))


@pytest.mark.slow
def test_without_data_dir_tfds_default_TFDS_DATA_DIR_is_read(tfds_dir):
    code = ("from bert_tf.tasks.tfds_data import read_tfds_examples as r; "
            "print(len(r('glue/rte', 'eval', None)), r('glue/rte', 'predict', None)[5].guid)")
    env = {**os.environ, "TFDS_DATA_DIR": tfds_dir, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3"}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["277", "predict-5"]
