"""Data prep's masking units and --masking=none, on real text, in faithful and sharded mode: each unit masks the
requested share of tokens, words are masked whole, SpanBERT's spans have the clipped geometric distribution's
lengths, and unmasked records carry the true tokens of exactly the instances static masking would write."""
from __future__ import annotations

import functools
import json
import random
import subprocess
import sys

import pytest

from shared_data import REPO_ROOT, shared_path

sys.path.insert(0, str(REPO_ROOT))

from bert_tf.data import tfrecord  # noqa: E402
from bert_tf.pretraining import instances as pd  # noqa: E402
from bert_tf.pretraining import sharded as spd  # noqa: E402
from bert_tf.pretraining import span_masking  # noqa: E402

SCRIPT = str(REPO_ROOT / "data_prep" / "create_pretraining_data.py")
MODES = ("faithful", "sharded")


def _vocab_file() -> str:
    return str(shared_path("vocab", "uncased", "vocab.txt"))


@functools.lru_cache(maxsize=None)
def _vocab() -> pd.VocabIds:
    return pd.VocabIds(pd.load_vocab_checked(_vocab_file()))


@functools.lru_cache(maxsize=None)
def _records(mode: str, **fields) -> tuple[dict, ...]:
    """Decoded records of wiki_sample.txt (dupe_factor 1) for these InstanceOptions fields."""
    options = pd.InstanceOptions(dupe_factor=1, **fields)
    text = list(pd.iter_text_documents([str(shared_path("golden", "create_pretraining_data", "input",
                                                        "wiki_sample.txt"))]))
    if mode == "sharded":
        records = spd.process_shard(text, 0, spd.ShardOptions(options, _vocab_file(), True, 7)).records
    else:
        tokenizer = pd.get_line_tokenizer("exact", _vocab_file(), True)
        documents = pd.tokenize_documents(text, tokenizer.tokenize_batch)
        records = pd.create_training_instances(documents, options, _vocab(), pd.StreamRandom(7),
                                               transform=pd.record_encoder(options, _vocab(), pd.InstanceStats()))
    return tuple(tfrecord.decode_example(r) for r in records)


def true_ids(example: dict) -> list[int]:
    ids = list(example["input_ids"])
    for position, original, weight in zip(example["masked_lm_positions"], example["masked_lm_ids"],
                                          example["masked_lm_weights"]):
        if weight:
            ids[position] = original
    return ids


def masked_positions(example: dict) -> set[int]:
    return {p for p, w in zip(example["masked_lm_positions"], example["masked_lm_weights"]) if w}


def words_of(example: dict) -> list[list[int]]:
    """The maskable positions grouped into words as the original's whole-word masking groups them."""
    ids, vocab = true_ids(example), _vocab()
    words: list[list[int]] = []
    for position, token in enumerate(ids[:sum(example["input_mask"])]):
        if token in (vocab.cls_id, vocab.sep_id):
            continue
        if words and vocab.is_subword[token]:
            words[-1].append(position)
        else:
            words.append([position])
    return words


def budget(example: dict, prob: float = 0.15, max_predictions: int = 20) -> int:
    return min(max_predictions, max(1, int(round(sum(example["input_mask"]) * prob))))


def mean_masked_run_words(examples) -> float:
    """Mean length, in words, of the runs of consecutive masked words (within a segment)."""
    runs = []
    for example in examples:
        masked, segments, run, last_segment = masked_positions(example), example["segment_ids"], 0, None
        for word in words_of(example):
            segment = segments[word[0]]
            if word[0] in masked and (run == 0 or segment == last_segment):
                run += 1
            else:
                runs.extend([run] if run else [])
                run = 1 if word[0] in masked else 0
            last_segment = segment
        runs.extend([run] if run else [])
    return sum(runs) / len(runs)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("unit", ["wordpiece", "word", "span"])
def test_each_masking_unit_masks_the_requested_share_of_tokens(mode, unit):
    examples = _records(mode, masking_unit=unit)
    tokens = sum(sum(e["input_mask"]) for e in examples)
    masked = [len(masked_positions(e)) for e in examples]
    wanted = [budget(e) for e in examples]
    assert len(examples) > 400 and all(m <= w for m, w in zip(masked, wanted))
    if unit == "wordpiece":
        assert masked == wanted  # always the whole budget, as the original
    else:  # whole words that would overflow the budget are left out: a few tokens short at most
        assert sum(masked) >= 0.99 * sum(wanted)
    assert sum(masked) / tokens == pytest.approx(0.15, abs=0.01)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("unit", ["word", "span"])
def test_word_and_span_units_mask_whole_words(mode, unit):
    split = whole = 0
    for example in _records(mode, masking_unit=unit):
        masked = masked_positions(example)
        for word in words_of(example):
            hit = sum(p in masked for p in word)
            split += 0 < hit < len(word)
            whole += hit == len(word) > 1
    assert split == 0 and whole > 100  # many words of several pieces, every one masked whole


def test_span_lengths_are_drawn_from_the_geometric_distribution_clipped_at_ten_words():
    rng = random.Random(3)
    lengths = [span_masking.span_length(rng.random()) for _ in range(200_000)]
    assert min(lengths) == 1 and max(lengths) == 10
    assert span_masking.MEAN_SPAN_WORDS == pytest.approx(3.79, abs=0.01)  # SpanBERT's 3.8
    assert sum(lengths) / len(lengths) == pytest.approx(span_masking.MEAN_SPAN_WORDS, abs=0.03)
    for length, p in enumerate(span_masking.SPAN_LENGTH_PROBS, start=1):
        assert lengths.count(length) / len(lengths) == pytest.approx(p, abs=0.005)


@pytest.mark.parametrize("mode", MODES)
def test_span_unit_masks_runs_of_words_as_long_as_the_geometric_mean(mode):
    # At 512 tokens the budget holds ~20 spans, so few are cut by it or by a segment's end.
    fields = dict(max_seq_length=512, max_predictions_per_seq=80)
    spans = mean_masked_run_words(_records(mode, masking_unit="span", **fields))
    words = mean_masked_run_words(_records(mode, masking_unit="word", **fields))
    assert spans == pytest.approx(span_masking.MEAN_SPAN_WORDS, abs=0.3)
    assert words < 1.5 < 3.0 < spans


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("unit", ["wordpiece", "span"])
def test_masking_none_writes_the_true_tokens_of_the_instances_static_masking_writes(mode, unit):
    static, none = _records(mode, masking_unit=unit), _records(mode, masking_unit=unit, masking="none")
    assert len(static) == len(none) > 400
    for masked, plain in zip(static, none):
        assert plain["input_ids"] == true_ids(masked)
        for name in ("input_mask", "segment_ids", "next_sentence_labels"):
            assert plain[name] == masked[name]
        assert plain["masked_lm_positions"] == plain["masked_lm_ids"] == [0] * 20
        assert plain["masked_lm_weights"] == [0.0] * 20


def _cli(tmp_path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, SCRIPT, f"--vocab_file={_vocab_file()}", *flags],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=600)


def test_masking_unit_word_writes_the_originals_whole_word_masking_records(tmp_path):
    golden = shared_path("golden", "create_pretraining_data", "wwm_uncased_seq256")
    out = tmp_path / "word.tfrecord"
    done = _cli(tmp_path, f"--input_file={golden.parent / 'input' / 'wiki_sample.txt'}", f"--output_file={out}",
                "--masking_unit=word", "--max_seq_length=256", "--max_predictions_per_seq=40", "--dupe_factor=2",
                "--random_seed=7")
    assert done.returncode == 0, done.stderr[-2000:]
    ours = [tfrecord.decode_example(r) for r in tfrecord.read_records(str(out))]
    originals = [tfrecord.decode_example(r) for r in tfrecord.read_records(str(golden / "wwm_uncased_seq256.tfrecord"))]
    assert len(ours) == 721 and ours == originals


def test_masking_none_cli_summary_counts_no_masked_positions(tmp_path):
    done = _cli(tmp_path, "--mode=sharded", "--masking=none", "--dupe_factor=1", "--num_workers=1",
                f"--input_file={shared_path('golden', 'create_pretraining_data', 'input', 'wiki_sample.txt')}",
                f"--output_file={tmp_path / 'plain'}")
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((tmp_path / "plain.summary.json").read_text())
    assert summary["instances"] > 400 and summary["masked_positions"] == 0
    assert summary["flags"]["masking"] == "none" and summary["flags"]["masking_unit"] == "wordpiece"


@pytest.mark.parametrize("flags, names", [(("--do_whole_word_mask", "--masking_unit=span"), "--masking_unit=span"),
                                          (("--masking=dynamic",), "--masking"),
                                          (("--masking_unit=phrase",), "--masking_unit")])
def test_bad_masking_flags_are_one_error_line(flags, names, tmp_path):
    done = _cli(tmp_path, f"--input_file={shared_path('golden', 'create_pretraining_data', 'input', 'wiki_sample.txt')}",
                f"--output_file={tmp_path / 'x.tfrecord'}", *flags)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "error" in lines[0] and names in lines[0], done.stderr[-1000:]
    assert not (tmp_path / "x.tfrecord").exists()
