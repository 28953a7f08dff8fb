"""bert_tf.tasks.squad.predictions against the original run_squad.py's own output files (shared goldens)."""
from __future__ import annotations

import gzip
import json
import os

import numpy as np
import pytest

from bert_tf.tasks.squad import data as squad_data
from bert_tf.tasks.squad import predictions as sp
from bert_tf.tasks.squad.predictions import RawResult, get_final_text, write_predictions
from shared_data import shared_path

V1 = "squad_v1.1_dev_articles_0_2"
V2 = "squad_v2.0_dev_articles_0_2"
SETTINGS = dict(n_best_size=20, max_answer_length=30, do_lower_case=True)  # the goldens' settings


def _jsonl(path):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _feature(d: dict) -> squad_data.SquadFeatures:
    return squad_data.SquadFeatures(
        unique_id=d["unique_id"], example_index=d["example_index"], doc_span_index=d["doc_span_index"],
        tokens=d["tokens"], token_to_orig_map={int(k): v for k, v in d["token_to_orig_map"].items()},
        token_is_max_context={int(k): v for k, v in d["token_is_max_context"].items()},
        input_ids=d["input_ids"], input_mask=d["input_mask"], segment_ids=d["segment_ids"],
        is_impossible=d["is_impossible"])


def _load(name: str):
    version_2 = name == V2
    examples = squad_data.read_squad_examples(shared_path("golden", name, "input.json"), is_training=False,
                                              version_2_with_negative=version_2)
    features = [_feature(d) for d in _jsonl(shared_path("golden", name, "features.eval.jsonl.gz"))]
    results = [RawResult(d["unique_id"], d["start_logits"], d["end_logits"])
               for d in _jsonl(shared_path("golden", name, "logits.eval.jsonl.gz"))]
    return examples, features, results


@pytest.fixture(scope="module")
def v1_data():
    return _load(V1)


@pytest.fixture(scope="module")
def v2_data():
    return _load(V2)


def _run(tmp_path, examples, features, results, version_2: bool, **kwargs):
    out = dict(output_prediction_file=tmp_path / "predictions.json",
               output_nbest_file=tmp_path / "nbest_predictions.json",
               output_null_log_odds_file=tmp_path / "null_odds.json" if version_2 else None)
    returned = write_predictions(examples, features, results, **SETTINGS, **out,
                                 version_2_with_negative=version_2, **kwargs)
    return returned, out


def _golden_bytes(name: str, file: str) -> bytes:
    return shared_path("golden", name, file).read_bytes()


def test_v1_predictions_and_nbest_files_are_byte_identical_to_the_original(tmp_path, v1_data):
    returned, out = _run(tmp_path, *v1_data, version_2=False)
    assert out["output_prediction_file"].read_bytes() == _golden_bytes(V1, "predictions.json")
    assert out["output_nbest_file"].read_bytes() == _golden_bytes(V1, "nbest_predictions.json")
    assert sorted(os.listdir(tmp_path)) == ["nbest_predictions.json", "predictions.json"]
    # The returned dicts are what was written, and the 16 nonce predictions are among them.
    assert json.dumps(returned.predictions, indent=4) + "\n" == _golden_bytes(V1, "predictions.json").decode()
    assert json.dumps(returned.nbest, indent=4) + "\n" == _golden_bytes(V1, "nbest_predictions.json").decode()
    assert returned.null_odds == {}
    nonce = [qid for qid, text in returned.predictions.items() if text == "empty"]
    assert len(nonce) == 16
    assert returned.nbest[nonce[0]] == [{"text": "empty", "probability": 1.0, "start_logit": 0.0, "end_logit": 0.0}]


def test_v2_predictions_nbest_and_null_odds_are_byte_identical_to_the_original(tmp_path, v2_data):
    returned, out = _run(tmp_path, *v2_data, version_2=True, null_score_diff_threshold=0.0)
    for file in ("predictions.json", "nbest_predictions.json", "null_odds.json"):
        assert (tmp_path / file).read_bytes() == _golden_bytes(V2, file), file
    assert sum(text == "" for text in returned.predictions.values()) == 257  # meta.json num_empty_predictions
    assert json.dumps(returned.null_odds, indent=4) + "\n" == _golden_bytes(V2, "null_odds.json").decode()


def test_float32_logits_give_the_same_bytes_as_python_floats(tmp_path, v1_data):
    """A model hands over float32 arrays; the original converted them with float(x) first."""
    examples, features, results = v1_data
    examples, features = examples[:40], [f for f in features if f.example_index < 40]
    ids = {f.unique_id for f in features}
    as_f32 = [RawResult(r.unique_id, np.asarray(r.start_logits, np.float32), np.asarray(r.end_logits, np.float32))
              for r in results if r.unique_id in ids]
    as_py = [r for r in results if r.unique_id in ids]
    a, _ = _run(tmp_path, examples, features, as_f32, version_2=False)
    b, _ = _run(tmp_path, examples, features, as_py, version_2=False)
    assert json.dumps(a, indent=4) == json.dumps(b, indent=4)


def _base_generator_logits(features, shipped):
    """The v2.0 golden's logits before its padding penalty: the same RandomState(0) draws at padding."""
    rs = np.random.RandomState(0)
    base = []
    for feature, result in zip(features, shipped):
        assert feature.unique_id == result.unique_id
        n = len(feature.tokens)
        logits = []
        for shipped_logits in (result.start_logits, result.end_logits):
            draw = rs.normal(0.0, 1.0, 384).astype(np.float32)
            assert np.array_equal(np.float32(shipped_logits[n:]), draw[n:] - np.float32(10.0))
            logits.append(list(shipped_logits[:n]) + [float(x) for x in draw[n:]])
        base.append(RawResult(result.unique_id, *logits))
    return base


def test_v2_example_with_only_the_null_answer_does_not_crash_and_gets_the_nonce_first(tmp_path, v2_data):
    """The base logits crashed the original on 45 examples (meta.json); we put the "empty" nonce first."""
    examples, features, shipped = v2_data
    meta = json.loads(shared_path("golden", V2, "meta.json").read_text())
    crashed = {e["qas_id"] for e in meta["original_crash_with_base_generator"]["crashing_examples"]}
    assert len(crashed) == 45
    returned, _ = _run(tmp_path, examples, features, _base_generator_logits(features, shipped), version_2=True)

    assert len(returned.predictions) == len(examples)
    only_null = {qid for qid, nbest in returned.nbest.items() if nbest[0]["text"] == "empty"}
    assert only_null == crashed
    for qid in crashed:
        nonce, null = returned.nbest[qid]
        assert (nonce["text"], nonce["start_logit"], nonce["end_logit"]) == ("empty", 0.0, 0.0)
        assert null["text"] == ""
        score_null = null["start_logit"] + null["end_logit"]
        assert nonce["probability"] == sp._compute_softmax([0.0, score_null])[0]
        assert returned.null_odds[qid] == score_null
        assert returned.predictions[qid] == ("" if score_null > 0.0 else "empty")
    assert {returned.predictions[qid] for qid in crashed} == {"", "empty"}  # both branches reached


def _tiny_example():
    example = squad_data.SquadExample(qas_id="q1", question_text="who?", doc_tokens=["Steve", "Smith's", "dog."])
    tokens = ["[CLS]", "who", "?", "[SEP]", "steve", "smith", "'", "s", "dog", ".", "[SEP]"]
    doc = {4: 0, 5: 1, 6: 1, 7: 1, 8: 2, 9: 2}
    feature = squad_data.SquadFeatures(
        unique_id=7, example_index=0, doc_span_index=0, tokens=tokens, token_to_orig_map=doc,
        token_is_max_context={i: True for i in doc}, input_ids=[0] * 16, input_mask=[1] * 11 + [0] * 5,
        segment_ids=[0] * 4 + [1] * 7 + [0] * 5)
    return example, feature


def test_v2_nonce_prediction_follows_the_null_score_threshold(tmp_path):
    example, feature = _tiny_example()
    start = [1.5] + [-9.0] * 10 + [5.0] * 29  # all 20 top indexes in the padding: no valid span
    end = [0.5] + [-9.0] * 10 + [5.0] * 29
    result = RawResult(7, start, end)
    for threshold, prediction in ((0.0, ""), (2.0, "empty")):
        returned, _ = _run(tmp_path, [example], [feature], [result], version_2=True,
                           null_score_diff_threshold=threshold)
        assert returned.predictions == {"q1": prediction}
        assert returned.null_odds == {"q1": 2.0}
        assert [e["text"] for e in returned.nbest["q1"]] == ["empty", ""]


def test_v1_tiny_example_projects_the_span_back_to_the_original_words(tmp_path):
    example, feature = _tiny_example()
    start = [0.0] * 16
    end = [0.0] * 16
    start[4], end[5] = 3.0, 2.0  # "steve smith" -> "Steve Smith" (not "Steve Smith's")
    returned, _ = _run(tmp_path, [example], [feature], [RawResult(7, start, end)], version_2=False)
    assert returned.predictions == {"q1": "Steve Smith"}


def test_compute_softmax_of_no_scores_is_empty_and_matches_math_exp():
    assert sp._compute_softmax([]) == []
    assert sp._compute_softmax([1.0]) == [1.0]
    e = 1.0 / (1.0 + 2.718281828459045 ** -1.0)
    assert sp._compute_softmax([2.0, 1.0])[0] == pytest.approx(e, rel=1e-15)


def test_get_best_indexes_keeps_index_order_on_ties():
    assert sp._get_best_indexes([0.5, 2.0, 2.0, -1.0, 2.0], 3) == [1, 2, 4]
    assert sp._get_best_indexes([1.0, 3.0], 5) == [1, 0]


def test_get_final_text_aligns_prediction_to_original_characters():
    assert get_final_text("steve smith", "Steve Smith's", True) == "Steve Smith"
    assert get_final_text("cafe", "Café au lait", True) == "Café"
    assert get_final_text("Steve", "Steve Smith's", False) == "Steve"


@pytest.mark.parametrize("pred_text, orig_text, do_lower_case, reason", [
    ("xyz", "Steve Smith's", True, "Unable to find text"),
    ("steve", "Steve Smith's", False, "Unable to find text"),  # cased: 'Steve' stays 'Steve'
    ("cafe", "Cafe\u0301 au lait", True, "Length not equal"),  # the combining accent is stripped
    (" smith", "Steve Smith's", True, "Couldn't map start position"),  # starts on a space
    ("steve ", "Steve Smith's", True, "Couldn't map end position"),  # ends on a space
    ("", "", True, "Couldn't map start position"),
])
def test_get_final_text_falls_back_to_the_original_text(pred_text, orig_text, do_lower_case, reason, caplog):
    with caplog.at_level("INFO", logger="bert_tf.tasks.squad.predictions"):
        assert get_final_text(pred_text, orig_text, do_lower_case, verbose_logging=True) == orig_text
    assert [r.getMessage() for r in caplog.records][0].startswith(reason)


def test_output_files_are_renamed_into_place_from_temp_files_beside_them(tmp_path, monkeypatch):
    example, feature = _tiny_example()
    result = RawResult(7, [0.0] * 16, [0.0] * 16)
    renames = []
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda src, dst: (renames.append((src, dst)), real_replace(src, dst)))
    _run(tmp_path, [example], [feature], [result], version_2=True)
    assert [os.path.basename(dst) for _, dst in renames] == [
        "predictions.json", "nbest_predictions.json", "null_odds.json"]
    for src, dst in renames:
        assert os.path.dirname(src) == os.path.dirname(os.path.abspath(dst)) == str(tmp_path)
        assert src != dst
    assert sorted(os.listdir(tmp_path)) == ["nbest_predictions.json", "null_odds.json", "predictions.json"]


def test_failure_while_writing_leaves_previous_file_and_no_temp_file(tmp_path, monkeypatch):
    example, feature = _tiny_example()
    result = RawResult(7, [0.0] * 16, [0.0] * 16)
    (tmp_path / "nbest_predictions.json").write_text("old\n")
    real_dumps = json.dumps

    def dumps(obj, **kwargs):
        if isinstance(obj.get("q1"), list):  # the n-best dict
            raise RuntimeError("disk full")
        return real_dumps(obj, **kwargs)

    monkeypatch.setattr(json, "dumps", dumps)
    with pytest.raises(RuntimeError, match="disk full"):
        _run(tmp_path, [example], [feature], [result], version_2=False)
    assert (tmp_path / "nbest_predictions.json").read_text() == "old\n"
    assert sorted(os.listdir(tmp_path)) == ["nbest_predictions.json", "predictions.json"]


def test_module_does_not_import_tensorflow():
    import subprocess
    import sys
    code = "import sys, bert_tf.tasks.squad.predictions; sys.exit('tensorflow' in sys.modules)"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    assert subprocess.run([sys.executable, "-c", code], cwd=root).returncode == 0
