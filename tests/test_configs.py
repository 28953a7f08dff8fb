"""BertConfig reading/writing/validation and the activation names."""
import json
import math

import numpy as np
import pytest

from shared_data import shared_path

from bert_tf.model.activations import get_activation
from bert_tf.model.configs import BertConfig, ConfigError

TINY = ("checkpoints", "tf1_tiny_from_original_bert_code")


def _tiny_dict():
    return json.loads(shared_path(*TINY, "bert_config.json").read_text())


def test_config_reads_the_original_bert_config_json():
    path = shared_path(*TINY, "bert_config.json")
    config = BertConfig.from_json_file(path)
    assert config.to_dict() == json.loads(path.read_text())
    assert config.head_size == config.hidden_size // config.num_attention_heads


def test_config_round_trip_keeps_unknown_keys(tmp_path):
    d = {**_tiny_dict(), "model_type": "bert", "pad_token_id": 0}
    config = BertConfig.from_dict(d, source="test")
    assert config.extra == {"model_type": "bert", "pad_token_id": 0}
    out = tmp_path / "bert_config.json"
    config.to_json_file(out)
    assert json.loads(out.read_text()) == d
    assert BertConfig.from_json_file(out) == config
    assert [p.name for p in tmp_path.iterdir()] == ["bert_config.json"]  # no temp file left


def test_config_missing_key_names_file_and_key(tmp_path):
    d = _tiny_dict()
    del d["vocab_size"]
    path = tmp_path / "bad_config.json"
    path.write_text(json.dumps(d))
    with pytest.raises(ConfigError, match=r"bad_config\.json.*'vocab_size'"):
        BertConfig.from_json_file(path)


def test_config_ill_typed_key_names_file_and_key(tmp_path):
    path = tmp_path / "typed.json"
    path.write_text(json.dumps({**_tiny_dict(), "hidden_size": "64"}))
    with pytest.raises(ConfigError, match=r"typed\.json.*'hidden_size' must be an integer"):
        BertConfig.from_json_file(path)


def test_config_not_json_names_the_file(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text("{vocab_size: 3")
    with pytest.raises(ConfigError, match="broken.json"):
        BertConfig.from_json_file(path)


def test_config_hidden_size_not_multiple_of_heads_is_error():
    with pytest.raises(ConfigError, match="not a multiple of 'num_attention_heads'"):
        BertConfig.from_dict({**_tiny_dict(), "num_attention_heads": 3}, source="cfg")


def test_config_unknown_activation_is_error():
    with pytest.raises(ConfigError, match="unknown 'hidden_act' 'gleu'"):
        BertConfig.from_dict({**_tiny_dict(), "hidden_act": "gleu"})


def test_validate_vocab_file_longer_than_vocab_size_is_error():
    config = BertConfig.from_dict(_tiny_dict())
    config.validate(vocab_file=shared_path(*TINY, "vocab.txt"))  # 1024 tokens: fine
    big_vocab = shared_path("vocab", "uncased", "vocab.txt")
    with pytest.raises(ConfigError, match=r"vocab\.txt: vocab file has 30522 tokens.*1024"):
        config.validate(vocab_file=big_vocab)


def test_validate_max_seq_length_over_position_table_is_error():
    config = BertConfig.from_dict(_tiny_dict())
    config.validate(max_seq_length=128)
    with pytest.raises(ConfigError, match="--max_seq_length=129 is longer than the model's positions: .*'max_position_embeddings' is 128"):
        config.validate(max_seq_length=129)


def test_gelu_is_the_original_tanh_approximation_and_gelu_exact_uses_erf():
    xs = np.linspace(-6.0, 6.0, 25)
    tanh_form = [0.5 * x * (1 + math.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
                 for x in xs]
    erf_form = [0.5 * x * (1 + math.erf(x / math.sqrt(2))) for x in xs]
    for name in ("gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        np.testing.assert_allclose(get_activation(name)(xs.astype(np.float32)), tanh_form,
                                   atol=1e-6)
    np.testing.assert_allclose(get_activation("gelu_exact")(xs.astype(np.float32)), erf_form,
                               atol=1e-6)
    assert abs(tanh_form[15] - erf_form[15]) > 1e-5  # x = 1.0: the two forms really differ
    with pytest.raises(ValueError, match="unknown activation 'mish'"):
        get_activation("mish")


def test_a_hugging_face_config_json_is_translated_and_keeps_its_erf_gelu(tmp_path):
    hf = {**_tiny_dict(), "model_type": "bert", "hidden_act": "gelu", "layer_norm_eps": 1e-12,
          "transformers_version": "4.8.2"}
    (tmp_path / "config.json").write_text(json.dumps(hf))
    assert BertConfig.from_json_file(tmp_path / "config.json").hidden_act == "gelu_exact"
    (tmp_path / "bert_config.json").write_text(json.dumps({**_tiny_dict(), "model_type": "bert"}))
    assert BertConfig.from_json_file(tmp_path / "bert_config.json").hidden_act == _tiny_dict()["hidden_act"]
