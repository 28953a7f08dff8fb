"""The set-up tools the swag and pretraining_helps studies' runs call: a SWAG-layout subset, SST-2's text as corpus
shards, a config with another vocab, an export with its pooler drawn again."""
from __future__ import annotations

import csv
import json

import numpy as np

from studies import tools


def test_a_multiple_choice_subset_keeps_the_header_and_whole_quoted_rows(tmp_path):
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    rows = [["", "sent1", "label"], ["0", "a line\nbreak", "1"], ["1", "b", "0"], ["2", "c", "3"]]
    for name in ("train.csv", "val.csv"):
        with open(src / name, "w", encoding="utf-8", newline="") as f:
            csv.writer(f).writerows(rows)
    tools.multiple_choice_subset(str(src), str(out), train_rows=2, dev_rows=1)
    with open(out / "train.csv", encoding="utf-8", newline="") as f:
        assert list(csv.reader(f)) == rows[:3]
    with open(out / "val.csv", encoding="utf-8", newline="") as f:
        assert list(csv.reader(f)) == rows[:2]
    assert not (out / "test.csv").exists()


def test_sst2_text_writes_documents_of_consecutive_lines_in_twenty_shards_without_labels(tmp_path):
    src = tmp_path / "SST-2"
    src.mkdir()
    lines = [f"sentence {i}\t{i % 2}\n" for i in range(45)]
    (src / "train.tsv").write_text("sentence\tlabel\n" + "".join(lines), encoding="utf-8")
    tools.sst2_text(str(src), str(tmp_path / "out"), lines_per_document=2)
    shards = sorted((tmp_path / "out").iterdir())
    assert len(shards) == 20 and shards[-1].name == "corpus-00019-of-00020.txt"
    assert shards[0].read_text(encoding="utf-8") == "sentence 0\nsentence 1\n\nsentence 40\nsentence 41\n\n"
    assert shards[19].read_text(encoding="utf-8") == "sentence 38\nsentence 39\n\n"


def base_config(tmp_path) -> str:
    path = tmp_path / "base_config.json"
    path.write_text(json.dumps({"hidden_size": 4, "initializer_range": 0.02, "vocab_size": 30522}), encoding="utf-8")
    return str(path)


def test_reset_pooler_draws_only_the_pooler_again_and_keeps_the_export_files(tmp_path):
    from bert_tf.checkpoints.tf1 import read_tf1_checkpoint, write_tf1_checkpoint

    src = tmp_path / "export"
    src.mkdir()
    weights = {"bert/pooler/dense/kernel": np.ones((4, 4), np.float32),
               "bert/pooler/dense/bias": np.ones((4,), np.float32),
               "bert/embeddings/word_embeddings": np.full((6, 4), 0.5, np.float32)}
    write_tf1_checkpoint(weights, str(src / "bert_model.ckpt"))
    (src / "vocab.txt").write_text("[PAD]\n", encoding="utf-8")
    tools.bert_config(base_config(tmp_path), str(src), vocab_size=6)  # the export's bert_config.json
    tools.reset_pooler(str(src), seed=1, out=str(tmp_path / "reset"))
    found = read_tf1_checkpoint(str(tmp_path / "reset" / "bert_model.ckpt"))
    assert np.array_equal(found["bert/embeddings/word_embeddings"], weights["bert/embeddings/word_embeddings"])
    assert not np.any(found["bert/pooler/dense/bias"])
    kernel = found["bert/pooler/dense/kernel"]
    assert np.all(np.abs(kernel) <= 2 * 0.02) and np.std(kernel) > 0
    assert (tmp_path / "reset" / "vocab.txt").read_text(encoding="utf-8") == "[PAD]\n"
    assert json.loads((tmp_path / "reset" / "bert_config.json").read_text(encoding="utf-8"))["vocab_size"] == 6
