"""Reading, writing and mapping the original TF1 checkpoints (shared tiny checkpoints)."""
import numpy as np
import pytest

from shared_data import shared_path

import bert_tf._env  # noqa: F401
import tensorflow as tf

from bert_tf.checkpoints import (CheckpointError, CheckpointMismatchError, get_tf1_weights,
                                 load_tf1_checkpoint, read_tf1_checkpoint, set_tf1_weights,
                                 write_tf1_checkpoint)
from bert_tf.model.configs import BertConfig
from bert_tf.model.heads import BertClassifierModel, BertPretrainingModel, BertSpanModel
from bert_tf.model.bert import BertModel

PRETRAIN = "tf1_tiny_from_original_bert_code"


def _folder(name=PRETRAIN):
    return shared_path("checkpoints", name)


def _listed_variables(folder):
    """name -> shape from variables.txt (what tf.train.list_variables reported)."""
    out = {}
    for line in (folder / "variables.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, shape, _ = line.split("\t")
            out[name] = tuple(int(s) for s in shape.strip("[]").split(",") if s.strip())
    return out


@pytest.fixture(scope="module")
def config():
    return BertConfig.from_json_file(_folder() / "bert_config.json")


@pytest.fixture(scope="module")
def weights():
    return read_tf1_checkpoint(_folder() / "bert_model.ckpt")


def test_read_keeps_model_variables_and_skips_adam_slots_and_global_step(weights):
    listed = _listed_variables(_folder())
    expected = {n: s for n, s in listed.items()
                if n != "global_step" and not n.endswith(("/adam_m", "/adam_v"))}
    assert len(listed) == 139 and len(expected) == 46
    assert {n: w.shape for n, w in weights.items()} == expected


@pytest.mark.parametrize("suffix", ["", ".index", ".data-00000-of-00001", "DIR"])
def test_read_accepts_prefix_index_data_file_or_folder(weights, suffix):
    folder = _folder()
    path = folder if suffix == "DIR" else f"{folder / 'bert_model.ckpt'}{suffix}"
    other = read_tf1_checkpoint(path)
    assert sorted(other) == sorted(weights)
    for name in weights:
        np.testing.assert_array_equal(other[name], weights[name])


def test_path_that_is_not_a_checkpoint_names_the_path(tmp_path):
    with pytest.raises(CheckpointError, match=r"nothing_here/bert_model\.ckpt: not a TF1"):
        read_tf1_checkpoint(tmp_path / "nothing_here" / "bert_model.ckpt")
    with pytest.raises(CheckpointError, match=f"{tmp_path}: folder holds no"):
        read_tf1_checkpoint(tmp_path)
    (tmp_path / "junk.index").write_bytes(b"not a checkpoint index")
    with pytest.raises(CheckpointError, match=r"junk: cannot read TF1 checkpoint"):
        read_tf1_checkpoint(tmp_path / "junk")


def test_get_tf1_weights_returns_exactly_the_loaded_values(config, weights):
    model = BertPretrainingModel(config)
    report = set_tf1_weights(model, weights)
    assert sorted(report.loaded) == sorted(weights) and not report.missing
    mine = get_tf1_weights(model)
    assert sorted(mine) == sorted(weights)
    for name, value in weights.items():
        np.testing.assert_array_equal(mine[name], value, err_msg=name)


def test_missing_variable_is_named(config, weights, tmp_path):
    partial = dict(weights)
    del partial["bert/encoder/layer_1/attention/self/key/bias"]
    write_tf1_checkpoint(partial, tmp_path / "partial.ckpt")
    with pytest.raises(CheckpointMismatchError) as err:
        load_tf1_checkpoint(BertPretrainingModel(config), tmp_path / "partial.ckpt")
    assert err.value.missing == ["bert/encoder/layer_1/attention/self/key/bias"]
    assert "missing from the checkpoint (1): bert/encoder/layer_1/attention/self/key/bias" \
        in str(err.value)
    assert "partial.ckpt" in str(err.value)


def test_shape_mismatch_is_named_and_nothing_is_assigned(config, weights):
    bad = dict(weights)
    bad["bert/pooler/dense/kernel"] = np.zeros((64, 32), np.float32)
    model = BertModel(config)
    before = get_tf1_weights(model)
    with pytest.raises(CheckpointMismatchError,
                       match=r"shape mismatch: bert/pooler/dense/kernel: model \[64, 64\], "
                             r"checkpoint \[64, 32\]"):
        set_tf1_weights(model, bad, ignore_unexpected=True)
    after = get_tf1_weights(model)
    for name in before:
        np.testing.assert_array_equal(after[name], before[name])


def test_unexpected_variables_are_named_unless_ignored(config):
    path = _folder() / "bert_model.ckpt"
    with pytest.raises(CheckpointMismatchError,
                       match="not in the model .*cls/predictions/output_bias"):
        load_tf1_checkpoint(BertModel(config), path)
    report = load_tf1_checkpoint(BertModel(config), path, ignore_unexpected=True)
    assert "cls/seq_relationship/output_weights" in report.unexpected and not report.missing


def test_fine_tuning_model_starts_from_a_pretraining_checkpoint(config):
    path = _folder() / "bert_model.ckpt"
    model = BertClassifierModel(config, num_labels=4)
    with pytest.raises(CheckpointMismatchError, match="missing .*output_weights, output_bias"):
        load_tf1_checkpoint(model, path, ignore_unexpected=True)
    report = load_tf1_checkpoint(model, path, allow_missing=["output_*"], ignore_unexpected=True)
    assert report.missing == ["output_weights", "output_bias"]
    assert get_tf1_weights(model)["output_weights"].shape == (4, 64)


@pytest.mark.parametrize("folder, make", [
    (PRETRAIN, BertPretrainingModel),
    ("tf1_tiny_classifier_from_original_bert_code", lambda c: BertClassifierModel(c, 3)),
    ("tf1_tiny_squad_from_original_bert_code", BertSpanModel),
])
def test_written_checkpoint_reads_back_identically_with_tf_train(config, tmp_path, folder, make):
    model = make(config)
    load_tf1_checkpoint(model, _folder(folder))
    prefix = tmp_path / "out" / "bert_model.ckpt"
    write_tf1_checkpoint(get_tf1_weights(model), prefix)
    assert sorted(p.name for p in prefix.parent.iterdir()) == [
        "bert_model.ckpt.data-00000-of-00001", "bert_model.ckpt.index"]
    reader = tf.train.load_checkpoint(str(prefix))
    original = read_tf1_checkpoint(_folder(folder))
    assert reader.get_variable_to_shape_map() == {n: list(v.shape) for n, v in original.items()}
    for name, value in original.items():
        np.testing.assert_array_equal(reader.get_tensor(name), value, err_msg=name)


def test_a_new_task_head_names_its_own_tf1_variables_and_round_trips_without_checkpoint_code(tmp_path):
    import keras

    from bert_tf.checkpoints import save_tf1_checkpoint
    from bert_tf.model.bert import BertModel
    from bert_tf.model.heads import OutputProjection

    class TokenTagger(keras.Model):  # a head this package's checkpoint code has never seen
        def __init__(self, config):
            super().__init__()
            self.bert = BertModel(config)
            self.tagger = OutputProjection(5, config.hidden_size, tf1_scope="cls/token_classifier")
            self.tagger.build()

    folder = shared_path("checkpoints", "tf1_tiny_from_original_bert_code")
    config = BertConfig.from_json_file(folder / "bert_config.json")
    model = TokenTagger(config)
    report = load_tf1_checkpoint(model, folder / "bert_model.ckpt", allow_missing=["cls/token_classifier/*"],
                                 ignore_unexpected=True)
    assert sorted(report.missing) == ["cls/token_classifier/output_bias", "cls/token_classifier/output_weights"]
    save_tf1_checkpoint(model, tmp_path / "tagger.ckpt")
    again = TokenTagger(config)
    load_tf1_checkpoint(again, tmp_path / "tagger.ckpt")
    for a, b in zip(model.weights, again.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
