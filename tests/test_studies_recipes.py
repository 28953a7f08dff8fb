"""The pieces the swag and pretraining_helps studies add: the old recipe folders and SWAG files as migrated records,
and the set-up tools their runs call (a SWAG-layout subset, SST-2's text as corpus shards, a config with another
vocab, an export with its pooler drawn again)."""
from __future__ import annotations

import csv
import json
import math

import numpy as np

from studies import tools
from studies.migrations import pretraining_helps, swag


def write(path, content) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(content), encoding="utf-8")


SCALE = {"pretrain": {"steps": 8000, "batch": 64, "learning_rate": 2e-4, "max_seq_length": 64, "max_predictions": 10,
                      "vocab_size": 8000, "dupe_factor": 10, "corpus": "sst2_train", "init_checkpoint": "/w/export"},
         "recipe": {"learning_rate": 5e-5, "epochs": 3.0, "batch": 32, "sst2_examples": 67349}}


def test_a_recipe_folder_becomes_records_of_its_recipe_and_init_with_its_side_files_as_labels(tmp_path, monkeypatch):
    monkeypatch.setattr(pretraining_helps, "d10_records", lambda results: [])
    folder = tmp_path / "v7k_sst2_dapt16k_reset_pooler"
    write(folder / "scale.json", SCALE)
    write(folder / "cpu.json", {"cpu_s": 6504.3, "jobs": 1, "wall_s": 7555.2})
    write(folder / "embedding_reset.json", {"parts": "pooler", "source": "/w/export", "seed": 1})
    write(folder / "unigram.json", {"masked_lm_loss": 6.6, "masked_lm_loss_all_mask": 6.59})
    write(folder / "pretrain-mlm.json", {"variant": "mlm", "perplexity": 10.3, "perplexity_all_mask": 13.2,
                                         "held_out": {"masked_lm_accuracy": 0.55}, "pretrain_wall_s": 4200.0,
                                         "curve": [{"step": 25.0, "masked_lm_loss": 3.0}]})
    write(folder / "sst2-mlm-s2.json", {"task": "sst2", "variant": "mlm", "seed": 2, "wall_s": 1240.7,
                                        "scores": {"accuracy": 82.8}})
    write(folder / "sst2-random_init-s1.json", {"seed": 1, "wall_s": 400.0, "scores": {"accuracy": 79.6}})
    write(tmp_path / "bench_classifier" / "scale.json", SCALE)  # not a recipe folder

    found = {r["key"]: r for r in pretraining_helps.migrate(str(tmp_path))}
    name = folder.name
    assert set(found) == {f"{name}-pretrain-mlm", f"{name}-sst2-mlm-s2", f"{name}-sst2-random_init-s1"}
    tuned = found[f"{name}-sst2-mlm-s2"]
    assert tuned["metrics"] == {"sst2_accuracy": 82.8} and tuned["seconds"] == 1240.7
    assert tuned["labels"]["recipe"] == name and tuned["labels"]["init"] == "mlm" and tuned["labels"]["seed"] == 2
    assert tuned["labels"]["reset"] == "pooler" and tuned["labels"]["continued_from"] == "/w/export"
    assert tuned["labels"]["sst2_sentences"] == 67349 and tuned["labels"]["folder_cpu_s"] == 6504
    assert tuned["cpu"] == "not recorded"  # cpu.json holds CPU seconds, not a CPU model
    pretrained = found[f"{name}-pretrain-mlm"]
    assert pretrained["metrics"] == {"perplexity": 10.3, "perplexity_all_mask": 13.2, "masked_lm_accuracy": 0.55,
                                     "context_free_perplexity": math.exp(6.6)}
    assert pretrained["seconds"] == 4200.0 and "seed" not in pretrained["labels"]


def test_a_random_init_only_folder_and_the_vocab_default_are_labelled():
    labels = pretraining_helps.recipe_labels({"pretrain": {**SCALE["pretrain"], "vocab_size": 0},
                                              "recipe": SCALE["recipe"]}, None, None)
    assert labels["vocab_size"] == 30522 and "reset" not in labels and "folder_cpu_s" not in labels
    assert pretraining_helps.reset_text({"parts": "top_layers", "layers": 2}) == "top 2 layer(s) and pooler"


def test_the_old_swag_files_become_the_swag_study_s_rows(tmp_path):
    for model, seed, accuracy in (("mini_mlm_nsp", 1, 34.4), ("mini_random", 2, 26.5)):
        write(tmp_path / "bench_ablations_d10" / f"swag-{model}-s{seed}.json",
              {"task": "swag", "variant": model, "seed": seed, "wall_s": 1059.2, "scores": {"accuracy": accuracy}})
    found = {r["key"]: r for r in swag.migrate(str(tmp_path))}
    assert set(found) == {"swag-mlm_nsp-s1", "swag-random_init-s2"}
    assert found["swag-mlm_nsp-s1"]["labels"] == {"task": "swag", "variant": "mlm_nsp", "seed": 1}
    assert found["swag-random_init-s2"]["metrics"] == {"swag_accuracy": 26.5}


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
