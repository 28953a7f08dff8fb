"""A Hugging Face BERT config.json and the original's bert_config.json, each into the other: pure translations
of dicts, at the model's level (BertConfig reads either file), used by the checkpoint converters."""
from __future__ import annotations

from typing import Mapping

from bert_tf.errors import BertTfError

ORIGINAL_LAYER_NORM_EPS = 1e-12

# Hugging Face "gelu" is the exact erf form; the original's "gelu" is the tanh approximation.
_HF_TO_ORIGINAL_ACT = {
    "gelu": "gelu_exact",
    "gelu_new": "gelu",
    "gelu_pytorch_tanh": "gelu",
    "gelu_fast": "gelu",
    "relu": "relu",
    "silu": "swish",
    "swish": "swish",
    "tanh": "tanh",
    "linear": "linear",
}
_ORIGINAL_TO_HF_ACT = {
    "gelu": "gelu_new",
    "gelu_new": "gelu_new",
    "gelu_pytorch_tanh": "gelu_pytorch_tanh",
    "gelu_fast": "gelu_fast",
    "gelu_exact": "gelu",
    "relu": "relu",
    "swish": "silu",
    "silu": "silu",
    "tanh": "tanh",
    "linear": "linear",
}
_CONFIG_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                "intermediate_size", "hidden_act", "hidden_dropout_prob",
                "attention_probs_dropout_prob", "max_position_embeddings", "type_vocab_size",
                "initializer_range")


class HFConversionError(BertTfError, ValueError):
    """A Hugging Face state dict or config cannot be mapped to the original BERT layout."""


def hf_config_to_original(hf: Mapping, *, source: str = "config.json") -> dict:
    """Translate a Hugging Face BERT config.json dict into an original bert_config.json dict.

    HF "gelu" (erf) becomes "gelu_exact" so the numerics of the source are kept.
    """
    model_type = hf.get("model_type", "bert")
    if model_type != "bert":
        raise HFConversionError(f"{source}: model_type is {model_type!r}, only 'bert' is supported")
    missing = [k for k in _CONFIG_KEYS if k not in hf and k != "hidden_act"]
    if missing:
        raise HFConversionError(f"{source}: missing keys {', '.join(missing)}")
    eps = float(hf.get("layer_norm_eps", ORIGINAL_LAYER_NORM_EPS))
    if eps != ORIGINAL_LAYER_NORM_EPS:
        raise HFConversionError(f"{source}: layer_norm_eps={eps} (the original BERT uses 1e-12)")
    position_type = hf.get("position_embedding_type", "absolute")
    if position_type != "absolute":
        raise HFConversionError(f"{source}: position_embedding_type={position_type!r} "
                                "(the original BERT has absolute positions only)")
    if hf.get("is_decoder") or hf.get("add_cross_attention"):
        raise HFConversionError(f"{source}: decoder / cross-attention BERT is not the original BERT")
    act = hf.get("hidden_act", "gelu")
    if act not in _HF_TO_ORIGINAL_ACT:
        raise HFConversionError(f"{source}: unsupported hidden_act {act!r}; supported: "
                                + ", ".join(sorted(_HF_TO_ORIGINAL_ACT)))
    config = {k: hf[k] for k in _CONFIG_KEYS if k != "hidden_act"}
    config["hidden_act"] = _HF_TO_ORIGINAL_ACT[act]
    return dict(sorted(config.items()))


def original_config_to_hf(config: Mapping, *, architecture: str = "BertModel",
                          source: str = "bert_config.json", labels: list[str] | None = None) -> dict:
    """Translate an original bert_config.json dict into a Hugging Face config.json dict.

    The original's "gelu" is the tanh approximation, written as HF "gelu_new"; "gelu_exact" -> "gelu".
    `labels` (a classifier head's outputs, in order) become id2label/label2id, which size transformers'
    head (num_labels).
    """
    missing = [k for k in _CONFIG_KEYS if k not in config]
    if missing:
        raise HFConversionError(f"{source}: missing keys {', '.join(missing)}")
    if config.get("causal_attention"):  # transformers' is_decoder would mask alike but pool [CLS], not the last token
        raise HFConversionError(f"{source}: a left-to-right model (causal_attention) has no Hugging Face BERT "
                                "equivalent; it is not converted")
    act = config["hidden_act"]
    if act not in _ORIGINAL_TO_HF_ACT:
        raise HFConversionError(f"{source}: unsupported hidden_act {act!r}")
    hf = {k: config[k] for k in _CONFIG_KEYS}
    hf.update(hidden_act=_ORIGINAL_TO_HF_ACT[act], architectures=[architecture], model_type="bert",
              layer_norm_eps=ORIGINAL_LAYER_NORM_EPS, position_embedding_type="absolute",
              pad_token_id=0, tie_word_embeddings=True)
    if labels:
        hf.update(id2label={str(i): label for i, label in enumerate(labels)},
                  label2id={label: i for i, label in enumerate(labels)})
    return dict(sorted(hf.items()))
