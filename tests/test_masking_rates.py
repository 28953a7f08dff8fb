"""The paper's Table 8 masking rates as data-prep flags (--mask_token_prob, --random_token_prob): the records
written in faithful and sharded mode hold the requested shares of [MASK], random and kept tokens among the
predicted positions; the defaults keep the original's draws (its goldens: test_create_pretraining_data)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from shared_data import REPO_ROOT, shared_path

sys.path.insert(0, str(REPO_ROOT))

from bert_tf.data import tfrecord  # noqa: E402
from bert_tf.pretraining import instances as pd  # noqa: E402

SCRIPT = str(REPO_ROOT / "data_prep" / "create_pretraining_data.py")
INPUT = shared_path("golden", "create_pretraining_data", "input", "wiki_sample.txt")
VOCAB = shared_path("vocab", "uncased", "vocab.txt")


def _shares(paths: list[str]) -> dict[str, float]:
    """Among predicted positions: the share shown as [MASK], as another word, and as the true word."""
    mask_id = VOCAB.read_text(encoding="utf-8").splitlines().index("[MASK]")
    counts = {"mask": 0, "random": 0, "kept": 0}
    for path in paths:
        for record in tfrecord.read_records(path):
            example = tfrecord.decode_example(record)
            ids, weights = example["input_ids"], example["masked_lm_weights"]
            for position, original, weight in zip(example["masked_lm_positions"], example["masked_lm_ids"], weights):
                if weight:
                    shown = ids[position]
                    counts["mask" if shown == mask_id else "kept" if shown == original else "random"] += 1
    total = sum(counts.values())
    assert total > 3000, total  # enough positions for the 0.03 bounds below (binomial sd < 0.01)
    return {name: count / total for name, count in counts.items()}


def _run(tmp_path, mode: str, *rates: str) -> list[str]:
    out = tmp_path / f"{mode}.tfrecord"
    done = subprocess.run([sys.executable, SCRIPT, f"--mode={mode}", f"--input_file={INPUT}", f"--vocab_file={VOCAB}",
                           f"--output_file={out}", "--dupe_factor=2", "--num_workers=1", *rates],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    if mode == "faithful":
        return [str(out)]
    return sorted(str(p) for p in tmp_path.glob("sharded*.tfrecord"))


@pytest.mark.parametrize("mode", ["faithful", "sharded"])
@pytest.mark.parametrize("mask, random_word", [(0.8, 0.1), (0.5, 0.3), (1.0, 0.0), (0.0, 0.0)])
def test_written_records_hold_the_requested_mask_random_and_kept_shares(mode, mask, random_word, tmp_path):
    shares = _shares(_run(tmp_path, mode, f"--mask_token_prob={mask}", f"--random_token_prob={random_word}"))
    # a random word equal to the true one (1 in ~30,000) counts as kept: within the bounds
    assert shares["mask"] == pytest.approx(mask, abs=0.03)
    assert shares["random"] == pytest.approx(random_word, abs=0.03)
    assert shares["kept"] == pytest.approx(1 - mask - random_word, abs=0.03)
    if mask in (1.0, 0.0) and random_word == 0.0:
        assert shares["random"] == 0.0 and shares[("mask" if mask else "kept")] == 1.0  # exact at the ends


def test_the_default_rates_give_the_originals_thresholds_exactly():
    assert pd.InstanceOptions().replacement_thresholds() == (0.8, 0.9, 0.5)


@pytest.mark.parametrize("flags", [("--mask_token_prob=0.7", "--random_token_prob=0.4"),
                                   ("--mask_token_prob=1.5",), ("--random_token_prob=-0.1",)])
def test_rates_that_cannot_be_shares_are_one_error_line(flags, tmp_path):
    done = subprocess.run([sys.executable, SCRIPT, f"--input_file={INPUT}", f"--vocab_file={VOCAB}",
                           f"--output_file={tmp_path / 'x.tfrecord'}", *flags], capture_output=True, text=True,
                          cwd=REPO_ROOT, timeout=300)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "error:" in lines[0] and ("mask_token_prob" in lines[0] or "random_token_prob" in lines[0])
    assert not (tmp_path / "x.tfrecord").exists()
