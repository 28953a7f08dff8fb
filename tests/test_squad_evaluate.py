"""bert_tf.tasks.squad.evaluate: the official SQuAD v1.1 / v2.0 numbers, float for float, on real predictions."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from bert_tf.tasks.squad import evaluate as se
from shared_data import REPO_ROOT, shared_path


def _load(*parts: str):
    with open(shared_path("squad", *parts), encoding="utf-8") as f:
        return json.load(f)


def _cli(*args, cwd=None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    return subprocess.run([sys.executable, "-m", "bert_tf.tasks.squad.evaluate", *map(str, args)],
                          capture_output=True, text=True, env=env, cwd=cwd, timeout=60)


def _tiny_dataset(version="1.1"):
    qas = [
        {"id": "q1", "question": "?", "answers": [{"text": "the Eiffel Tower", "answer_start": 0}]},
        {"id": "q2", "question": "?", "answers": [{"text": "Paris", "answer_start": 0},
                                                  {"text": "Paris, France", "answer_start": 0}]},
    ]
    return {"version": version, "data": [{"title": "t", "paragraphs": [{"context": "c", "qas": qas}]}]}


# --------------------------------------------------------------- official numbers on real files

@pytest.mark.parametrize("pred_file, expected", [
    ("electra_dev-v1.1.json", {"exact_match": 87.00094607379376, "f1": 92.63854944567895}),
    ("bert_tf2_cag9_dev-v1.1.json", {"exact_match": 66.5752128666036, "f1": 76.83816556278796}),
])
def test_v1_matches_official_script_exactly_on_real_predictions(pred_file, expected):
    result = se.evaluate_v1(_load("dev-v1.1.json")["data"], _load("predictions", pred_file))
    assert result == expected  # float ==, not approx
    assert json.dumps(result) == json.dumps(expected)


V2_OFFICIAL = {
    "exact": 83.13821275162132, "f1": 86.30317740069837, "total": 11873,
    "HasAns_exact": 82.43927125506073, "HasAns_f1": 88.77827686884139, "HasAns_total": 5928,
    "NoAns_exact": 83.83515559293524, "NoAns_f1": 83.83515559293524, "NoAns_total": 5945,
    "best_exact": 84.27524635728123, "best_exact_thresh": -5.604948997497559,
    "best_f1": 87.20515458088056, "best_f1_thresh": -5.604948997497559,
}


def test_v2_with_na_probs_matches_official_script_exactly_in_value_and_key_order():
    result = se.evaluate_v2(_load("dev-v2.0.json")["data"],
                            _load("predictions", "squad2_ensemble_dev-v2.0.json"),
                            _load("predictions", "squad2_ensemble_dev-v2.0.null_odds.json"))
    assert list(result) == list(V2_OFFICIAL)
    assert json.dumps(result) == json.dumps(V2_OFFICIAL)


def test_v2_without_na_probs_has_the_first_nine_official_fields_and_no_best_fields():
    result = se.evaluate_v2(_load("dev-v2.0.json")["data"],
                            _load("predictions", "squad2_ensemble_dev-v2.0.json"))
    assert dict(result) == {k: v for k, v in V2_OFFICIAL.items() if not k.startswith("best")}


# --------------------------------------------------------------- CLI

def test_cli_prints_the_official_v1_json_line():
    proc = _cli(shared_path("squad", "dev-v1.1.json"),
                shared_path("squad", "predictions", "electra_dev-v1.1.json"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == '{"exact_match": 87.00094607379376, "f1": 92.63854944567895}\n'


def test_cli_v2_detected_from_version_and_written_to_out_file(tmp_path):
    out = tmp_path / "eval.json"
    proc = _cli(shared_path("squad", "dev-v2.0.json"),
                shared_path("squad", "predictions", "squad2_ensemble_dev-v2.0.json"),
                "--na-prob-file", shared_path("squad", "predictions",
                                              "squad2_ensemble_dev-v2.0.null_odds.json"),
                "--out-file", out)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert out.read_text() == json.dumps(V2_OFFICIAL)


def test_cli_picks_v2_from_is_impossible_when_version_is_absent(tmp_path):
    data = _tiny_dataset()
    del data["version"]
    data["data"][0]["paragraphs"][0]["qas"].append(
        {"id": "q3", "question": "?", "answers": [], "is_impossible": True})
    (tmp_path / "d.json").write_text(json.dumps(data))
    (tmp_path / "p.json").write_text(json.dumps({"q1": "Eiffel Tower", "q2": "Lyon", "q3": ""}))
    proc = _cli(tmp_path / "d.json", tmp_path / "p.json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert (result["total"], result["HasAns_total"], result["NoAns_total"]) == (3, 2, 1)
    assert result["NoAns_exact"] == 100.0 and result["HasAns_exact"] == 50.0


@pytest.mark.parametrize("case", ["missing_file", "invalid_json", "predictions_not_object",
                                  "prediction_not_string", "not_squad_format"])
def test_cli_bad_input_gives_one_readable_line_naming_the_file(tmp_path, case):
    data, preds = tmp_path / "data.json", tmp_path / "preds.json"
    data.write_text(json.dumps(_tiny_dataset()))
    preds.write_text(json.dumps({"q1": "x"}))
    named = preds
    if case == "missing_file":
        named = tmp_path / "nowhere.json"
        preds = named
    elif case == "invalid_json":
        preds.write_text('{"q1": "x",')
    elif case == "predictions_not_object":
        preds.write_text('["x", "y"]')
    elif case == "prediction_not_string":
        preds.write_text('{"q1": 3}')
    else:
        data.write_text(json.dumps({"version": "1.1", "data": [{"title": "no paragraphs"}]}))
        named = data
    proc = _cli(data, preds)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(named) in lines[0], proc.stderr
    assert proc.stdout == ""


# --------------------------------------------------------------- small handmade cases

def test_v1_missing_prediction_counts_zero_and_is_reported_on_stderr(capsys):
    result = se.evaluate_v1(_tiny_dataset()["data"], {"q1": "Eiffel Tower"})
    assert result == {"exact_match": 50.0, "f1": 50.0}
    assert "Unanswered question q2 will receive score 0." in capsys.readouterr().err


def test_v2_missing_prediction_counts_zero_everywhere(capsys):
    data = _tiny_dataset("v2.0")["data"]
    data[0]["paragraphs"][0]["qas"].append({"id": "q3", "question": "?", "answers": []})
    result = se.evaluate_v2(data, {"q1": "Eiffel Tower", "q2": "Paris"}, {"q1": 0.1, "q2": 0.2})
    assert result["exact"] == 100.0 * 2 / 3 and result["NoAns_exact"] == 0.0
    assert result["best_exact"] == 100.0 * 2 / 3  # the missing unanswerable one never scores
    assert "Missing prediction for q3" in capsys.readouterr().err


def test_v1_takes_the_max_over_ground_truths():
    data = _tiny_dataset()["data"]
    assert se.evaluate_v1(data, {"q1": "x", "q2": "paris france"}) == {"exact_match": 50.0, "f1": 50.0}


@pytest.mark.parametrize("raw, normalized", [
    ("The Eiffel Tower!", "eiffel tower"),
    ("an apple, a pear and THE plum", "apple pear and plum"),
    ("theatre another", "theatre another"),  # articles only as whole words
    ("  U.S.   Army\t", "us army"),
    ("¿Qué?", "¿qué"),  # only ASCII punctuation is removed
    ("the", ""),
])
def test_normalize_answer_lowercases_strips_punctuation_articles_and_spaces(raw, normalized):
    assert se.normalize_answer(raw) == normalized


def test_f1_is_token_overlap_with_repeated_tokens_counted_once_each():
    # pred 3 tokens, gold 2, overlap {new: 1, york: 1} -> P 2/3, R 1, F1 0.8
    assert se.f1_score_v1("new york new", "New York") == pytest.approx(0.8)
    assert se.compute_f1("New York", "new york new") == se.f1_score_v1("new york new", "New York")
    assert se.f1_score_v1("Paris", "London") == 0
    assert se.exact_match_v1("The Paris.", "paris") is True


def test_v1_f1_is_zero_for_empty_answers_but_v2_empty_agrees_with_empty():
    assert se.f1_score_v1("", "") == 0 and se.f1_score_v1("the", "a") == 0
    assert se.compute_f1("", "") == 1 and se.compute_exact("", "") == 1
    assert se.compute_f1("", "something") == 0 and se.compute_f1("Paris", "") == 0
    assert se.compute_f1("", "the") == 1  # "the" normalises to nothing, so it is an empty answer


def test_v2_gold_answers_normalising_to_nothing_make_the_question_unanswerable():
    qas = [{"id": "q", "question": "?", "answers": [{"text": "The", "answer_start": 0}]}]
    data = [{"title": "t", "paragraphs": [{"context": "c", "qas": qas}]}]
    exact, f1 = se.get_raw_scores(data, {"q": ""})
    assert exact == {"q": 1} and f1 == {"q": 1}
    assert se.get_raw_scores(data, {"q": "The"}) == ({"q": 1}, {"q": 1})


def test_v2_threshold_turns_high_na_prob_into_empty_answers():
    data = _tiny_dataset("v2.0")["data"]
    data[0]["paragraphs"][0]["qas"].append({"id": "q3", "question": "?", "answers": []})
    preds = {"q1": "Eiffel Tower", "q2": "Paris", "q3": "Lyon"}
    na_probs = {"q1": 0.1, "q2": 0.9, "q3": 0.8}
    plain = se.evaluate_v2(data, preds)
    assert plain["exact"] == 100.0 * 2 / 3 and plain["NoAns_exact"] == 0.0
    cut = se.evaluate_v2(data, preds, na_probs, na_prob_thresh=0.5)
    assert cut["HasAns_exact"] == 50.0 and cut["NoAns_exact"] == 100.0
    # Walk by na_prob from "all empty" (q3 right = 1): q1 at 0.1 -> 2, q3 at 0.8 -> 1, q2 at 0.9 -> 2;
    # only a strict improvement moves the best, so 2/3 at threshold 0.1.
    assert (cut["best_exact"], cut["best_exact_thresh"]) == (100.0 * 2 / 3, 0.1)
    assert list(cut)[-4:] == ["best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh"]


def test_v2_na_prob_file_missing_a_predicted_question_is_a_value_error():
    with pytest.raises(ValueError, match="q2"):
        se.evaluate_v2(_tiny_dataset("v2.0")["data"], {"q1": "a", "q2": "b"}, {"q1": 0.5})
