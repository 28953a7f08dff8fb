"""SQuAD examples and features equal the original run_squad.py's, field for field, on the shared goldens."""
from __future__ import annotations

import gzip
import json

import pytest

from bert_tf.tasks.squad import data as squad_data
from bert_tf.text import tokenization
from shared_data import shared_path

GOLDEN = {"1.1": "squad_v1.1_dev_articles_0_2", "2.0": "squad_v2.0_dev_articles_0_2"}
# (golden features file, examples file, is_training, max_seq_length, doc_stride, max_query_length)
FEATURE_SETS = [
    ("features.eval.jsonl.gz", "input.json", False, 384, 128, 64),
    ("features.train.jsonl.gz", "input.train.json", True, 384, 128, 64),
    ("features.eval.seq128_stride64.jsonl.gz", "input.json", False, 128, 64, 32),
]
_TOKENIZER: list = []


def tokenizer() -> tokenization.FullTokenizer:
    if not _TOKENIZER:
        _TOKENIZER.append(tokenization.FullTokenizer(shared_path("vocab", "uncased", "vocab.txt"), True))
    return _TOKENIZER[0]


def golden_features(version: str, name: str) -> list[dict]:
    with gzip.open(shared_path("golden", GOLDEN[version], name), "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def as_golden_json(feature: squad_data.SquadFeatures, is_training: bool) -> dict:
    """Our feature in the goldens' JSON form (dict keys as strings, in insertion order)."""
    out = {"unique_id": feature.unique_id, "example_index": feature.example_index, "doc_span_index":
           feature.doc_span_index, "tokens": feature.tokens,
           "token_to_orig_map": {str(k): v for k, v in feature.token_to_orig_map.items()},
           "token_is_max_context": {str(k): v for k, v in feature.token_is_max_context.items()},
           "input_ids": feature.input_ids, "input_mask": feature.input_mask, "segment_ids": feature.segment_ids,
           "is_impossible": feature.is_impossible}
    if is_training:
        out["start_position"], out["end_position"] = feature.start_position, feature.end_position
    return out


@pytest.mark.parametrize("version", sorted(GOLDEN))
@pytest.mark.parametrize("feature_set", FEATURE_SETS, ids=lambda s: s[0].split(".jsonl")[0])
def test_features_equal_the_originals_field_for_field(version, feature_set):
    name, input_name, is_training, max_seq_length, doc_stride, max_query_length = feature_set
    expected = golden_features(version, name)
    examples = squad_data.read_squad_examples(shared_path("golden", GOLDEN[version], input_name), is_training,
                                              version_2_with_negative=version == "2.0")
    features = squad_data.convert_examples_to_features(examples, tokenizer(), max_seq_length, doc_stride,
                                                       max_query_length, is_training)
    got = [as_golden_json(f, is_training) for f in features]
    assert len(got) == len(expected)
    for ours, theirs in zip(got, expected):
        theirs = {k: v for k, v in theirs.items() if k != "qas_id"}
        assert ours == theirs, f"feature {theirs['unique_id']} differs"
        # Key order too: the original's dicts are written in insertion order.
        assert list(ours["token_to_orig_map"]) == list(theirs["token_to_orig_map"])
    assert all(examples[f["example_index"]].qas_id == f["qas_id"] for f in expected)


def test_context_splits_on_the_originals_whitespace_only():
    words, char_to_word = squad_data.split_context(" The\u202fcat\u00a0sat\n on  a mat.")
    assert words == ["The", "cat\u00a0sat", "on", "a", "mat."]  # NBSP is not whitespace to the original
    assert char_to_word[:5] == [-1, 0, 0, 0, 0] and char_to_word[-1] == 4


def test_v2_impossible_training_questions_point_to_cls(tmp_path):
    path = tmp_path / "train.json"
    path.write_text(json.dumps({"version": "v2.0", "data": [{"paragraphs": [{"context": "Paris is in France.",
        "qas": [{"id": "a", "question": "Where is Paris?", "is_impossible": False,
                 "answers": [{"text": "France", "answer_start": 12}]},
                {"id": "b", "question": "Where is Rome?", "is_impossible": True, "answers": []}]}]}]}))
    examples = squad_data.read_squad_examples(path, is_training=True, version_2_with_negative=True)
    assert [(e.start_position, e.end_position, e.is_impossible) for e in examples] == [(3, 3, False), (-1, -1, True)]
    features = list(squad_data.convert_examples_to_features(examples, tokenizer(), 32, 16, 8, True))
    first, second = features
    assert first.tokens[first.start_position:first.end_position + 1] == ["france"]
    assert (second.start_position, second.end_position, second.is_impossible) == (0, 0, True)
    assert [f.unique_id for f in features] == [1000000000, 1000000001]


def test_bad_squad_input_gets_one_readable_error(tmp_path):
    with pytest.raises(squad_data.SquadDataError, match="not found"):
        squad_data.read_squad_examples(tmp_path / "missing.json", False)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(squad_data.SquadDataError, match="bad.json is not a SQuAD json file"):
        squad_data.read_squad_examples(bad, False)
    bad.write_text("[1, 2]")
    with pytest.raises(squad_data.SquadDataError, match="no top-level \"data\" list"):
        squad_data.read_squad_examples(bad, False)
    two = tmp_path / "two.json"
    two.write_text(json.dumps({"data": [{"paragraphs": [{"context": "a b", "qas": [
        {"id": "q", "question": "?", "answers": [{"text": "a", "answer_start": 0}] * 2}]}]}]}))
    with pytest.raises(ValueError, match="exactly 1 answer \\(question q has 2\\)"):
        squad_data.read_squad_examples(two, True)
    with pytest.raises(ValueError, match="max_seq_length \\(10\\) must be greater"):
        list(squad_data.convert_examples_to_features([], tokenizer(), 10, 4, 8, False))
