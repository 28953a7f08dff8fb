"""Dynamic masking in the pre-training input pipeline, on real records: the requested rates, new masks each time a
record comes round, the same masks for the same seed, exactly the uninterrupted run's masks after a restart, the
same distributions as data prep's masking units, and run_pretraining --dynamic_masking end to end."""
from __future__ import annotations

import functools
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from kill_points import kill_once_recorded
from shared_data import shared_path
from test_masking_units import mean_masked_run_words, words_of
from test_run_pretraining import ROOT, TINY, exported_weights, run

import bert_tf._env  # noqa: F401
import tensorflow as tf

from bert_tf.data import tfrecord
from bert_tf.pretraining import instances as pd
from bert_tf.pretraining.dynamic_masking import DynamicMasking
from bert_tf.pretraining.input_pipeline import pretraining_dataset

BATCH = 16


def _vocab_file() -> str:
    return str(shared_path("vocab", "uncased", "vocab.txt"))


@functools.lru_cache(maxsize=None)
def _vocab() -> pd.VocabIds:
    return pd.VocabIds(pd.load_vocab_checked(_vocab_file()))


@pytest.fixture(scope="module")
def records(tmp_path_factory) -> dict[str, str]:
    """wiki_sample.txt as data prep writes it (faithful, dupe_factor 1): masked and unmasked (--masking=none)."""
    folder = tmp_path_factory.mktemp("records")
    text = str(shared_path("golden", "create_pretraining_data", "input", "wiki_sample.txt"))
    paths = {}
    for masking in ("static", "none"):
        paths[masking] = str(folder / f"{masking}.tfrecord")
        pd.run_faithful([text], [paths[masking]], _vocab_file(), True,
                        pd.InstanceOptions(dupe_factor=1, masking=masking), 12345, log=lambda _: None)
    return paths


def masking(seed: int | None = 1, **fields) -> DynamicMasking:
    return DynamicMasking(pd.InstanceOptions(**fields), _vocab(), seed)


def dataset(path: str, masks: DynamicMasking | None, *, training: bool = False, seed: int = 3) -> tf.data.Dataset:
    return pretraining_dataset([path], batch_size=BATCH, max_seq_length=masks.options.max_seq_length if masks else 128,
                               max_predictions_per_seq=masks.options.max_predictions_per_seq if masks else 20,
                               is_training=training, seed=seed, deterministic=True, masking=masks)


def batches(data: tf.data.Dataset, count: int) -> list[dict[str, np.ndarray]]:
    return [{name: value.numpy() for name, value in batch.items()} for batch in data.take(count)]


def num_records(path: str) -> int:
    return sum(1 for _ in tfrecord.read_records(path))


def as_examples(batch_list) -> list[dict]:
    """Rows of parsed batches as decode_example-like dicts (for the data-prep tests' helpers)."""
    return [{name: batch[name][row].tolist() for name in batch} for batch in batch_list
            for row in range(len(batch["input_ids"]))]


def assert_equal_batches(first, second) -> None:
    assert len(first) == len(second)
    for a, b in zip(first, second):
        for name in a:
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)


@pytest.mark.parametrize("unit", ["wordpiece", "word", "span"])
@pytest.mark.parametrize("mask, random_word", [(0.8, 0.1), (0.5, 0.3)])
def test_dynamic_masks_hold_the_requested_shares_and_predict_the_true_tokens(records, unit, mask, random_word):
    masks = masking(masking_unit=unit, mask_token_prob=mask, random_token_prob=random_word)
    steps = num_records(records["none"]) // BATCH
    plain, masked = batches(dataset(records["none"], None), steps), batches(dataset(records["none"], masks), steps)
    counts, tokens, chosen, wanted = {"mask": 0, "random": 0, "kept": 0}, 0, 0, 0
    for truth, batch in zip(plain, masked):
        for row in range(BATCH):
            ids, true = batch["input_ids"][row], truth["input_ids"][row]
            n, k = int(truth["input_mask"][row].sum()), int(batch["masked_lm_weights"][row].sum())
            positions = batch["masked_lm_positions"][row][:k]
            assert list(positions) == sorted(set(positions)) and not set(positions) & {0, n - 1}
            np.testing.assert_array_equal(batch["masked_lm_ids"][row][:k], true[positions])
            others = np.setdiff1d(np.arange(128), positions)
            np.testing.assert_array_equal(ids[others], true[others])  # nothing else changes
            for shown, original in zip(ids[positions], true[positions]):
                counts["mask" if shown == _vocab().mask_id else "kept" if shown == original else "random"] += 1
            tokens, chosen, wanted = tokens + n, chosen + k, wanted + min(20, max(1, round(n * 0.15)))
    assert chosen == wanted if unit == "wordpiece" else wanted >= chosen >= 0.97 * wanted
    assert chosen / tokens == pytest.approx(0.15, abs=0.01)
    # a span is replaced as one, so its shares vary more
    bound = 0.03 if unit != "span" else 0.05
    assert counts["mask"] / chosen == pytest.approx(mask, abs=bound)
    assert counts["random"] / chosen == pytest.approx(random_word, abs=bound)


@pytest.mark.parametrize("unit", ["word", "span"])
def test_dynamic_word_and_span_masks_cover_whole_words_with_data_preps_span_lengths(records, unit):
    # Long sequences, so that few spans are cut by the budget: data prep's 512-token records of the same text.
    masks = masking(masking_unit=unit, max_seq_length=512, max_predictions_per_seq=80)
    prep = pd.InstanceOptions(dupe_factor=1, max_seq_length=512, max_predictions_per_seq=80, masking_unit=unit)
    text = str(shared_path("golden", "create_pretraining_data", "input", "wiki_sample.txt"))
    out = os.path.join(os.path.dirname(records["none"]), f"long_{unit}.tfrecord")
    pd.run_faithful([text], [out], _vocab_file(), True, prep, 5, log=lambda _: None)
    examples = as_examples(batches(dataset(out, masks), num_records(out) // BATCH))
    split = 0
    for example in examples:
        masked = {p for p, w in zip(example["masked_lm_positions"], example["masked_lm_weights"]) if w}
        split += sum(0 < sum(p in masked for p in word) < len(word) for word in words_of(example))
    assert split == 0
    ours = mean_masked_run_words(examples)
    static = mean_masked_run_words([tfrecord.decode_example(r) for r in tfrecord.read_records(out)])
    assert ours == pytest.approx(static, abs=0.3)  # data prep's masks of the same records: same distribution
    assert (ours > 3.0) if unit == "span" else (ours < 1.5)


def test_static_records_are_unmasked_before_new_masks_are_drawn(records):
    steps = 10
    masks = masking(seed=9)
    assert_equal_batches(batches(dataset(records["static"], masks), steps),
                         batches(dataset(records["none"], masks), steps))


def test_the_same_record_gets_new_masks_each_time_it_comes_round(records):
    per_pass = num_records(records["none"])  # evaluation reads the records in order, again and again
    rows = as_examples(batches(dataset(records["none"], masking()), 2 * per_pass // BATCH + 1))
    same = 0
    for first, again in zip(rows[:per_pass], rows[per_pass:2 * per_pass]):
        assert first["input_mask"] == again["input_mask"] and first["segment_ids"] == again["segment_ids"]
        same += first["masked_lm_positions"] == again["masked_lm_positions"]
    assert same <= 0.01 * per_pass  # new positions (almost) every time: ~19 of ~125 tokens


def test_one_seed_draws_the_same_masks_and_another_seed_others(records):
    first = batches(dataset(records["none"], masking(seed=4), training=True), 6)
    again = batches(dataset(records["none"], masking(seed=4), training=True), 6)
    assert_equal_batches(first, again)
    other = batches(dataset(records["none"], masking(seed=5)), 6)
    plain = batches(dataset(records["none"], masking(seed=4)), 6)
    for a, b in zip(plain, other):
        np.testing.assert_array_equal(a["next_sentence_labels"], b["next_sentence_labels"])  # same records
        assert not np.array_equal(a["masked_lm_positions"], b["masked_lm_positions"])


@pytest.mark.parametrize("unit", ["wordpiece", "span"])
def test_a_restarted_pipeline_draws_exactly_the_masks_of_an_uninterrupted_one(records, unit, tmp_path):
    def make():
        return dataset(records["none"], masking(seed=8, masking_unit=unit), training=True, seed=2)

    whole = batches(make(), 12)
    # the trainer's two ways to resume: skip the finished batches, or restore the iterator from a checkpoint
    assert_equal_batches(batches(make().skip(7), 5), whole[7:])
    iterator = iter(make())
    for _ in range(7):
        next(iterator)
    saved = tf.train.Checkpoint(iterator=iterator).save(str(tmp_path / "it"))
    restored = iter(make())
    tf.train.Checkpoint(iterator=restored).restore(saved).assert_consumed()
    assert_equal_batches([{k: v.numpy() for k, v in next(restored).items()} for _ in range(5)], whole[7:])


TRAIN = ("--do_train", "--dynamic_masking", "--deterministic", "--seed=5", "--num_train_steps=12",
         "--save_checkpoints_steps=3", "--steps_per_loop=3")


@pytest.mark.slow
def test_run_pretraining_with_dynamic_masking_trains_evaluates_and_resumes_to_the_same_weights(records, tmp_path):
    flags = (*TRAIN, f"--input_file={records['none']}", "--masking_unit=span")
    done = run(tmp_path / "whole", *flags, "--do_eval")
    results = dict(line.split(" = ") for line in (tmp_path / "whole" / "out" / "eval_results.txt").read_text().splitlines())
    assert float(results["masked_lm_loss"]) > 0 and "step 12/12" in done.stderr
    (tmp_path / "split").mkdir()
    config = tmp_path / "split" / "bert_config.json"
    config.write_text(json.dumps(TINY))
    out = tmp_path / "split" / "out"
    args = [sys.executable, os.path.join(ROOT, "run_pretraining.py"), f"--bert_config_file={config}",
            f"--output_dir={out}", "--train_batch_size=8", "--num_warmup_steps=2", "--learning_rate=1e-3",
            f"--vocab_file={_vocab_file()}", *flags]
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    kill_once_recorded(process, out, 6)
    resumed = run(tmp_path / "split", *flags)
    assert "Resumed from" in resumed.stderr
    whole, split = exported_weights(tmp_path / "whole" / "out" / "export"), exported_weights(out / "export")
    for name in whole:
        np.testing.assert_array_equal(whole[name], split[name], err_msg=name)


@pytest.mark.parametrize("extra, message", [
    (("--masking_unit=span",), "--masking_unit applies only with --dynamic_masking"),
    (("--dynamic_masking", "--vocab_file="), "--dynamic_masking needs --vocab_file"),
    (("--dynamic_masking", "--mask_token_prob=0.7", "--random_token_prob=0.4"), "--mask_token_prob=0.7"),
])
def test_bad_dynamic_masking_flags_are_one_error_line(extra, message, tmp_path):
    done = run(tmp_path, "--do_train", *extra, check=False)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and message in lines[-1], done.stderr[-1000:]
    assert lines[-1].startswith("run_pretraining.py: error: ")


def test_unmasked_records_without_dynamic_masking_are_one_error_line(records, tmp_path):
    done = run(tmp_path, "--do_train", f"--input_file={records['none']}", check=False)
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 1 and "none.tfrecord: record 0 has no masked positions" in last
    assert "--dynamic_masking" in last
