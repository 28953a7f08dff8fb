"""The speed studies' own logic: the ratio of ours to the best peer, a study not yet measured, the readers of the
contenders' result files, and the bench helpers whose output the readers trust (line hashes, the sentence rule)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from bench import tokenizer_contender, wiki_sentences
from studies import report, speed_readers
from studies.records import Store
from studies.study import Column, Run, Study, Table, Versus
from studies.tables import by_name


def rows_of(**means: float) -> dict[tuple, list[dict]]:
    return {(name,): [{"metrics": {"rate": value, "ms": value}}] for name, value in means.items()}


TABLE = Table(rows=("contender",), columns=(Column("rate", "seq/s"), Column("ms", "p50 ms")),
              row_names={("ours",): "ours", ("a",): "peer A", ("b",): "peer B"},
              versus=(Versus("throughput", "rate", ("ours",), (("a",), ("b",))),
                      Versus("latency", "ms", ("ours",), (("a",), ("b",)), lower_is_better=True)))


def test_the_ratio_is_ours_over_the_best_peer_turned_so_that_above_one_means_ours_leads():
    rows = rows_of(ours=30.0, a=20.0, b=10.0)
    assert report.ratio(TABLE.versus[0], rows) == (1.5, ("a",), 30.0, 20.0)  # the fastest peer
    assert report.ratio(TABLE.versus[1], rows) == (10.0 / 30.0, ("b",), 30.0, 10.0)  # the lowest latency
    lines = report.versus_lines(TABLE, rows)
    assert lines[0] == "- Ours vs the best peer, throughput: **1.50×** (seq/s 30.0 vs 20.0, peer A)."
    assert lines[1].startswith("- Ours vs the best peer, latency: **0.33×**")


def test_a_ratio_without_our_row_or_any_peer_is_not_measured():
    assert report.ratio(TABLE.versus[0], rows_of(a=20.0)) is None
    assert report.ratio(TABLE.versus[0], rows_of(ours=20.0)) is None
    assert report.versus_lines(TABLE, rows_of(ours=20.0))[0] == \
        "- Ours vs the best peer, throughput: not measured at this scale."


def test_a_study_without_records_renders_as_not_yet_measured_with_its_command(tmp_path):
    study = Study("speed_x", "X speed", "no paper", "About X.",
                  lambda scale, seeds: [Run("ours", "bench.x", ("--out={out}",), lambda out, f: {})], TABLE,
                  kind="speed")
    text = report.study_section(study, Store(str(tmp_path / "store")), "machine", str(tmp_path), "plots")
    assert "**Not yet measured** at this scale: `studies/results/speed_x.jsonl` holds no record of it." in text
    assert "`make paper PAPER_ARGS='--only=speed_x'` measures it." in text
    assert "|" not in text  # no table, no figure


def test_the_inference_reader_gives_the_probability_difference_in_millionths(tmp_path):
    (tmp_path / "result.json").write_text(json.dumps(
        {"b1_short": {"p50_ms": 9.5, "p99_ms": 12.0}, "b32_long": {"sentences_per_s": 70.0},
         "max_abs_diff_vs_hf": 6e-8, "check": {}}))
    found = speed_readers.inference(str(tmp_path), {})
    assert found["b1_short_p50_ms"] == 9.5 and found["b32_sentences_per_s"] == 70.0
    assert found["max_abs_diff_vs_hf_ppm"] == pytest.approx(0.06) and "max_abs_diff_vs_hf" not in found


def test_the_model_window_reader_gives_sequences_per_second_over_the_timed_steps(tmp_path):
    (tmp_path / "result.json").write_text(json.dumps(
        {"batch_size": 32, "forward_s": [0.5, 0.5], "train_s": [2.0, 2.0], "forward_flops_per_seq": 1e9}))
    found = speed_readers.model_window(str(tmp_path), {})
    assert found == {"forward_seq_per_s": 64.0, "train_seq_per_s": 16.0, "train_gflops": 48.0}


def test_line_hashes_are_the_same_for_id_lists_and_flat_ids_with_row_splits():
    lists = [[101, 7592], [], [2023, 2003, 102]]
    flat = (np.array([101, 7592, 2023, 2003, 102]), np.array([0, 2, 2, 5]))
    assert (tokenizer_contender.line_hashes(lists) == tokenizer_contender.line_hashes(flat)).all()
    assert len(set(tokenizer_contender.line_hashes(lists).tolist())) == 3


def test_the_sentence_rule_splits_after_a_full_stop_but_not_after_an_abbreviation_or_an_initial():
    text = "Dr. Smith met J. Doe in 1990. They talked! \"Then\" it rained."
    assert wiki_sentences.split_sentences(text) == ["Dr. Smith met J. Doe in 1990.", "They talked!",
                                                    "\"Then\" it rained."]


def test_the_original_is_declared_only_when_a_checkout_is_named(monkeypatch):
    monkeypatch.delenv("BERT_TF_ORIGINAL_BERT", raising=False)
    for name in ("speed_tokenizer", "speed_data_prep"):
        assert not any(r.key == "original" for r in by_name()[name].plan("machine"))
    monkeypatch.setenv("BERT_TF_ORIGINAL_BERT", "/opt/bert")
    plan = by_name()["speed_data_prep"].plan("machine")
    assert "--original=/opt/bert" in next(r for r in plan if r.key == "original").flags
    assert "--same_as={run:original}" in next(r for r in plan if r.key == "faithful").flags
    assert any(r.key == "original" for r in by_name()["speed_tokenizer"].plan("machine"))
