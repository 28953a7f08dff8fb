"""The frozen encoder's activations per word, for the paper's feature-based NER study (Table 7).

BERT is not fine-tuned: each word's first sub-token is read from the chosen hidden layers of the
pre-trained encoder, run once over the same document-context windows fine-tuning uses, and the
vectors are cached (--feature_cache_dir, default OUTPUT_DIR/features) as one .npy table per layer
[words, hidden] (float32, in file order: sentence by sentence, word by word) that later runs, of
any feature choice, memory-map instead of encoding again. The tables are keyed by the windows'
settings and inputs and the checkpoint's bytes, and used only when their sidecar record matches.

Layer choices (hidden state 0 is the embedding output, i the output of layer i of L):
    embeddings        0                  last              L
    second_to_last    L-1                sum_last_four / concat_last_four   L-3..L
    sum_all           1..L  (the paper's "all 12 layers" of BERT-Base: every layer, no embeddings)
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from typing import Sequence

import numpy as np
from absl import logging

from bert_tf.data.atomic_io import atomic_write
from bert_tf.data.files import file_sha256
from bert_tf.errors import BertTfError
from bert_tf.tasks.ner.features import TagWindow

FEATURES = ("embeddings", "second_to_last", "last", "sum_last_four", "concat_last_four", "sum_all")
PROGRESS_SECONDS = 30


def layer_indices(features: str, num_layers: int) -> tuple[int, ...]:
    """The hidden states (0 = embeddings, i = layer i) a feature choice reads."""
    last = num_layers
    choices = {"embeddings": (0,), "second_to_last": (last - 1,), "last": (last,),
               "sum_last_four": tuple(range(last - 3, last + 1)),
               "concat_last_four": tuple(range(last - 3, last + 1)), "sum_all": tuple(range(1, last + 1))}
    if features not in choices:
        raise BertTfError(f"--features must be one of {', '.join(FEATURES)}, got {features!r}")
    if min(choices[features]) < 0 or (features.endswith("four") and num_layers < 4):
        raise BertTfError(f"--features={features} needs at least 4 layers; the model has {num_layers}")
    return choices[features]


def checkpoint_fingerprint(path: str) -> str:
    """A hash of the checkpoint's bytes (a TF1/ours prefix's files, or a Hugging Face folder's files)."""
    if os.path.isdir(path):
        files = sorted(os.path.join(path, name) for name in os.listdir(path))
    else:
        folder, prefix = os.path.split(os.path.abspath(path))
        files = sorted(os.path.join(folder, name) for name in os.listdir(folder) if name.startswith(prefix + "."))
    digest = hashlib.sha256()
    for name in (f for f in files if os.path.isfile(f)):
        digest.update(f"{os.path.basename(name)}:{file_sha256(name)}\n".encode())
    return digest.hexdigest()[:16]


def encode_words(model, windows: Sequence[TagWindow], layers: Sequence[int], batch_size: int = 32) -> np.ndarray:
    """[words, len(layers), hidden] float32: each scored word's first-sub-token states, in window order.

    Batches run only as long as their longest window (padding is masked, so the states of the real
    tokens are the same as at full length, float round-off apart)."""
    import tensorflow as tf

    from bert_tf.model import custom_ops

    ids = tf.TensorSpec([None, None], tf.int32)

    @tf.function(input_signature=[{"input_ids": ids, "input_mask": ids, "segment_ids": ids},
                                  tf.TensorSpec([None, 2], tf.int32)])
    def states(inputs, scored):
        with custom_ops.program_inference():
            outputs = model(inputs, training=False)
        hidden = tf.stack([outputs["embedding_output"], *outputs["encoder_outputs"]], axis=2)
        return tf.gather_nd(tf.gather(hidden, list(layers), axis=2), scored)

    words = sum(len(w.positions) for w in windows)
    table = np.empty((words, len(layers), model.bert_config.hidden_size), np.float32)
    done, start, last_log = 0, time.perf_counter(), time.perf_counter()
    for first in range(0, len(windows), batch_size):
        batch = windows[first:first + batch_size]
        inputs, scored = _batch(batch)
        values = states(inputs, scored).numpy()
        table[done:done + len(values)] = values
        done += len(values)
        if time.perf_counter() - last_log >= PROGRESS_SECONDS:
            last_log = time.perf_counter()
            rate = (first + len(batch)) / (last_log - start)
            logging.info("encoding frozen features: %d/%d windows, %.1f windows/s, ETA %.0f s", first + len(batch),
                         len(windows), rate, (len(windows) - first - len(batch)) / rate)
    logging.info("encoded %d words of %d windows in %.1f s", words, len(windows), time.perf_counter() - start)
    return table


def _batch(batch: Sequence[TagWindow]):
    length = max(len(w.input_ids) for w in batch)
    ids = np.zeros((len(batch), length), np.int32)
    mask = np.zeros_like(ids)
    for row, window in enumerate(batch):
        ids[row, :len(window.input_ids)] = window.input_ids
        mask[row, :len(window.input_ids)] = 1
    scored = np.array([(row, p) for row, w in enumerate(batch) for p in w.positions], np.int32).reshape(-1, 2)
    return {"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids)}, scored


def cached_layers(prefix: str, layers: Sequence[int], encode) -> list[np.ndarray]:
    """Each layer's table [words, hidden], memory-mapped from PREFIX-layerI.npy when cached there, else
    from one `encode(missing_layers)` -> [words, len(missing), hidden] whose layers are cached each in
    its own file, so that other feature choices over the same windows reuse them."""
    paths = {layer: f"{prefix}-layer{layer}.npy" for layer in layers}
    tables = {layer: _cached(paths[layer]) for layer in layers}
    missing = [layer for layer in layers if tables[layer] is None]
    found = [paths[layer] for layer in layers if tables[layer] is not None]
    if found:
        logging.info("frozen features from the cache: %s", ", ".join(found))
    if missing:
        encoded = encode(missing)
        for k, layer in enumerate(missing):
            tables[layer] = cached_table(paths[layer], lambda: np.ascontiguousarray(encoded[:, k]))
    return [tables[layer] for layer in layers]


def _cached(path: str) -> np.ndarray | None:
    """The memory-mapped table at `path` when its sidecar record matches the file, else None."""
    try:
        with open(path + ".json", encoding="utf-8") as f:
            record = json.load(f)
        if os.path.getsize(path) == record["bytes"]:
            table = np.load(path, mmap_mode="r")
            if list(table.shape) == record["shape"]:
                return table
    except (OSError, ValueError, KeyError):
        pass
    return None


def cached_table(path: str, make) -> np.ndarray:
    """The table cached at `path` (memory-mapped) when its sidecar matches, else `make()` saved there
    (atomically) and returned."""
    table = _cached(path)
    if table is not None:
        return table
    table = make()
    with atomic_write(path, "wb") as f:
        np.save(f, table)
    with atomic_write(path + ".json") as f:
        json.dump({"shape": list(table.shape), "bytes": os.path.getsize(path)}, f)
    return np.load(path, mmap_mode="r")
