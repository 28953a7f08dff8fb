"""The Hugging Face torch side of the model benchmark: transformers' BertForPreTraining on torch CPU."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from bench._shapes import LEARNING_RATE, WEIGHT_DECAY, Dims, Runner, Shape, forward_flops_per_seq

if TYPE_CHECKING:
    import torch


def build_hf_torch(dims: Dims, shape: Shape, batch: dict[str, np.ndarray], gathered: bool) -> Runner:
    """transformers BertForPreTraining on torch CPU; `gathered` applies the MLM head only at the masked positions."""
    import torch
    import transformers

    torch.manual_seed(0)  # threads: torch's default (one per core), as a user gets it
    config = transformers.BertConfig(
        vocab_size=dims.vocab_size, hidden_size=dims.hidden_size, num_hidden_layers=dims.num_layers,
        num_attention_heads=dims.num_heads, intermediate_size=dims.intermediate_size, hidden_act="gelu",
        hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, max_position_embeddings=dims.max_position,
        type_vocab_size=dims.type_vocab_size)
    model = transformers.BertForPreTraining(config)
    t = {k: torch.from_numpy(v).long() if v.dtype == np.int32 else torch.from_numpy(v) for k, v in batch.items()}
    optimizer = _torch_adamw(model)

    def heads(input_ids_kwargs):
        if not gathered:
            out = model(**input_ids_kwargs)
            return out.prediction_logits, out.seq_relationship_logits
        sequence, pooled = model.bert(**input_ids_kwargs, return_dict=False)[:2]
        index = t["masked_lm_positions"][..., None].expand(-1, -1, sequence.shape[-1])
        return model.cls.predictions(sequence.gather(1, index)), model.cls.seq_relationship(pooled)

    model_inputs = {"input_ids": t["input_ids"], "attention_mask": t["input_mask"], "token_type_ids": t["segment_ids"]}

    labels = torch.full_like(t["input_ids"], -100).scatter_(1, t["masked_lm_positions"], t["masked_lm_ids"])

    def loss_fn():
        if not gathered:  # the stock path: HF's own loss over [B, T] labels, -100 where not masked
            return model(**model_inputs, labels=labels, next_sentence_label=t["next_sentence_labels"]).loss
        mlm_logits, nsp_logits = heads(model_inputs)
        mlm_ce = torch.nn.functional.cross_entropy(mlm_logits.flatten(0, 1), t["masked_lm_ids"].flatten(),
                                                   reduction="none")
        weights = t["masked_lm_weights"].flatten()
        mlm_loss = (mlm_ce * weights).sum() / (weights.sum() + 1e-5)
        return mlm_loss + torch.nn.functional.cross_entropy(nsp_logits, t["next_sentence_labels"])

    def forward():
        model.eval()
        with torch.inference_mode():
            mlm_logits, nsp_logits = heads(model_inputs)
        return float(nsp_logits.sum())

    def train_step():
        model.train()
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn()
        loss.backward()
        optimizer.step()
        return loss.item()

    mlm_positions = None if gathered else shape.seq_len
    name = "HF torch BertForPreTraining" + (" (MLM head gathered)" if gathered else " (stock full-vocab MLM head)")
    return Runner(name, forward, train_step, forward_flops_per_seq(dims, shape, mlm_positions),
                  note=f"attn={model.config._attn_implementation}, threads={torch.get_num_threads()}")


def _torch_adamw(model) -> "torch.optim.AdamW":
    """torch AdamW with no decay on biases and LayerNorm weights, as the original."""
    import torch

    decay, no_decay = [], []
    for name, param in model.named_parameters():
        (no_decay if "bias" in name or "LayerNorm" in name else decay).append(param)
    return torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY},
                              {"params": no_decay, "weight_decay": 0.0}], lr=LEARNING_RATE, eps=1e-6)
