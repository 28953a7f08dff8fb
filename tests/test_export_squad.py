"""The end-to-end SQuAD SavedModel (bert_tf.export.squad): its in-graph windows and answer selection against
the ORIGINAL run_squad.py's goldens, and the saved model, loaded by a process that cannot import bert_tf,
against our Python pipeline (bert_tf.tasks.squad) with the same fine-tuned checkpoint."""
import gzip
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from serving_host import assert_each_hostile_request_gets_its_own_answer_or_error, serve_briefly
from shared_data import shared_path
from test_squad_predictions import _base_generator_logits, _load, _run

import bert_tf._env  # noqa: F401

from bert_tf import checkpoints
from bert_tf.export import program
from bert_tf.export.squad import SquadModule, SquadSettingsError
from bert_tf.options import parse
from bert_tf.model.configs import BertConfig
from bert_tf.model.heads import BertSpanModel
from bert_tf.tasks.squad import data as squad_data
from bert_tf.tasks.squad.predictions import RawResult, write_predictions
from bert_tf.text.tokenization import FullTokenizer

ROOT = pathlib.Path(__file__).resolve().parent.parent
V1 = "squad_v1.1_dev_articles_0_2"
V2 = "squad_v2.0_dev_articles_0_2"
SQUAD_CKPT = "tf1_tiny_squad_from_original_bert_code"
ANSWERS = dict(n_best_size=20, max_answer_length=30, null_score_diff_threshold=0.0)  # the goldens' settings
TINY_WINDOWS = dict(seq_length=128, doc_stride=64, max_query_length=32)  # the tiny model has 128 positions
TINY_QUESTIONS = 60


def _jsonl(path):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _questions(name: str) -> tuple[list[str], list[str], list[str]]:
    """(questions, contexts, ids) of a golden's input.json, in read_squad_examples' order."""
    questions, contexts, ids = [], [], []
    for article in json.loads(shared_path("golden", name, "input.json").read_text(encoding="utf-8"))["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                questions.append(qa["question"])
                contexts.append(paragraph["context"])
                ids.append(qa["id"])
    return questions, contexts, ids


def _module(version_2: bool = False, model=None, vocab_file=None, seq_length=384, doc_stride=128,
            max_query_length=64) -> SquadModule:
    vocab_file = vocab_file or str(shared_path("vocab", "uncased", "vocab.txt"))
    return SquadModule(model, vocab_file, True, seq_length=seq_length, doc_stride=doc_stride,
                       max_query_length=max_query_length, version_2_with_negative=version_2, **ANSWERS)


@pytest.fixture(scope="module")
def v1_module():
    return _module()


@pytest.fixture(scope="module")
def v2_module():
    return _module(version_2=True)


def _window_logits(name: str) -> tuple[np.ndarray, np.ndarray]:
    logits = _jsonl(shared_path("golden", name, "logits.eval.jsonl.gz"))
    return tuple(np.array([d[key] for d in logits], np.float32) for key in ("start_logits", "end_logits"))


def _answers(module: SquadModule, name: str, start_logits, end_logits) -> dict[str, np.ndarray]:
    questions, contexts, _ = _questions(name)
    out = module.answers_from_logits(questions, contexts, start_logits, end_logits)
    return {key: value.numpy() for key, value in out.items()}


def _texts(values) -> list[str]:
    return [v.decode("utf-8") for v in values]


@pytest.mark.slow
@pytest.mark.parametrize("file, windows", [
    ("features.eval.jsonl.gz", dict(seq_length=384, doc_stride=128, max_query_length=64)),
    ("features.eval.seq128_stride64.jsonl.gz", dict(seq_length=128, doc_stride=64, max_query_length=32))])
def test_in_graph_windows_equal_the_originals_features_for_every_question(file, windows, v1_module):
    module = v1_module if windows["seq_length"] == 384 else _module(**windows)
    questions, contexts, _ = _questions(V1)
    got = {key: value.numpy() for key, value in module.features(questions, contexts).items()}
    golden = _jsonl(shared_path("golden", V1, file))
    assert len(golden) == len(got["input_ids"]) > len(questions) == 1169
    for key, ours in (("example_index", "example"), ("doc_span_index", "span_index"), ("input_ids", "input_ids"),
                      ("input_mask", "input_mask"), ("segment_ids", "segment_ids")):
        np.testing.assert_array_equal(got[ours], [g[key] for g in golden], err_msg=key)
    for g, orig, max_context in zip(golden, got["token_to_orig"], got["max_context"]):
        doc = np.flatnonzero(orig >= 0)
        assert {str(p): int(orig[p]) for p in doc} == g["token_to_orig_map"], g["unique_id"]
        assert {str(p): bool(max_context[p]) for p in doc} == g["token_is_max_context"], g["unique_id"]
        assert not max_context[orig < 0].any()


def _offsets_point_at_the_answers(contexts: list[str], got: dict) -> int:
    """context[start:end] is the answer, up to whitespace between its doc tokens; returns how many differ so."""
    differ = 0
    for context, text, start, end in zip(contexts, _texts(got["text"]), got["start"], got["end"]):
        if start < 0:
            assert text in ("", "empty") and end == -1
            continue
        if context[start:end] != text:
            assert " ".join(context[start:end].split()) == text, (text, context[start:end])
            differ += 1
    return differ


@pytest.mark.slow
def test_in_graph_answers_are_the_originals_v1_predictions_for_every_question(v1_module):
    _, contexts, ids = _questions(V1)
    got = _answers(v1_module, V1, *_window_logits(V1))
    predictions = json.loads(shared_path("golden", V1, "predictions.json").read_text(encoding="utf-8"))
    nbest = json.loads(shared_path("golden", V1, "nbest_predictions.json").read_text(encoding="utf-8"))
    assert _texts(got["text"]) == [predictions[i] for i in ids]  # all 1,169, 16 of them the "empty" nonce
    best = [nbest[i][0] for i in ids]
    np.testing.assert_allclose(got["probability"], [b["probability"] for b in best], rtol=0, atol=1e-12)
    np.testing.assert_allclose(got["score"], [b["start_logit"] + b["end_logit"] for b in best], rtol=0, atol=1e-12)
    assert _offsets_point_at_the_answers(contexts, got) == 0


@pytest.mark.slow
def test_in_graph_answers_are_the_originals_v2_predictions_and_null_odds(v2_module):
    _, contexts, ids = _questions(V2)
    got = _answers(v2_module, V2, *_window_logits(V2))
    predictions = json.loads(shared_path("golden", V2, "predictions.json").read_text(encoding="utf-8"))
    null_odds = json.loads(shared_path("golden", V2, "null_odds.json").read_text(encoding="utf-8"))
    texts = _texts(got["text"])
    assert texts == [predictions[i] for i in ids]  # all 950
    assert 0 < texts.count("") < len(texts)
    np.testing.assert_allclose(got["null_score_diff"], [null_odds[i] for i in ids], rtol=0, atol=1e-12)
    assert _offsets_point_at_the_answers(contexts, got) == 0


@pytest.mark.slow
def test_v2_examples_with_only_the_null_answer_get_the_python_pipelines_nonce_not_a_crash(v2_module, tmp_path):
    """The logits that crashed the original on 45 examples: answered as bert_tf.tasks.squad.predictions does."""
    examples, features, shipped = _load(V2)
    base = _base_generator_logits(features, shipped)
    expected, _ = _run(tmp_path, examples, features, base, version_2=True)
    got = _answers(v2_module, V2, *(np.array([getattr(r, key) for r in base], np.float32)
                                    for key in ("start_logits", "end_logits")))
    ids = [e.qas_id for e in examples]
    assert _texts(got["text"]) == [expected.predictions[i] for i in ids]
    assert "empty" in _texts(got["text"])
    np.testing.assert_allclose(got["null_score_diff"], [expected.null_odds[i] for i in ids], rtol=0, atol=1e-12)


def test_settings_the_original_cannot_run_with_are_refused():
    with pytest.raises(SquadSettingsError, match="greater than max_query_length"):
        _module(seq_length=64, max_query_length=61)
    with pytest.raises(SquadSettingsError, match="doc_stride must be at least 1"):
        _module(doc_stride=0)


# ---- the SavedModel, from the tiny fine-tuned checkpoint ----------------------------------------------------

_CLEAN_PROCESS = textwrap.dedent("""
    import json, sys
    sys.modules["bert_tf"] = None
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the WordPiece op)
    inputs = json.load(open("inputs.json", encoding="utf-8"))
    squad = tf.saved_model.load(sys.argv[1])
    served = squad.signatures["serving_default"](question=tf.constant(inputs["question"]),
                                                 context=tf.constant(inputs["context"]))
    called = squad(inputs["question"], inputs["context"])
    windows = squad.window_logits(inputs["question"], inputs["context"])
    assert not [m for m, v in sys.modules.items() if m.startswith("bert_tf") and v is not None]
    settings = {name: getattr(squad, name).numpy() for name in ("seq_length", "doc_stride", "max_query_length",
                "n_best_size", "max_answer_length", "version_2_with_negative", "null_score_diff_threshold",
                "do_lower_case")}
    np.savez("outputs.npz", **{f"served/{k}": v.numpy() for k, v in served.items()},
             **{f"called/{k}": v.numpy() for k, v in called.items()},
             **{f"windows/{k}": v.numpy() for k, v in windows.items()}, **settings)
""")


def _run_without_bert_tf(folder: pathlib.Path, inputs: dict, cwd: pathlib.Path) -> dict:
    (cwd / "inputs.json").write_text(json.dumps(inputs), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    done = subprocess.run([sys.executable, "-I", "-c", _CLEAN_PROCESS, str(folder)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(np.load(cwd / "outputs.npz", allow_pickle=True))


@pytest.fixture(scope="module")
def tiny_model() -> BertSpanModel:
    folder = shared_path("checkpoints", SQUAD_CKPT)
    model = BertSpanModel(BertConfig.from_json_file(folder / "bert_config.json"))
    checkpoints.load_init_checkpoint(model, folder / "bert_model.ckpt")
    return model


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> pathlib.Path:
    """bert-tf-export of the original's tiny SQuAD checkpoint: its head makes the squad/ task model."""
    out = tmp_path_factory.mktemp("squad")
    flags = [f"--{name}={value}" for name, value in TINY_WINDOWS.items()]
    program.run(parse(program.ExportOptions, [f"--init_checkpoint={shared_path('checkpoints', SQUAD_CKPT)}",
                                               f"--output_dir={out}", "--saved_models=task", *flags,
                                               "--n_best_size=20", "--max_answer_length=30"]))
    assert os.listdir(out) == ["squad"]
    return out / "squad"


def _python_pipeline(model: BertSpanModel, tmp_path: pathlib.Path):
    """Our run_squad.py --do_predict path on the first questions of the v1.1 golden input."""
    source = json.loads(shared_path("golden", V1, "input.json").read_text(encoding="utf-8"))
    paragraphs = source["data"][0]["paragraphs"][:12]
    input_file = tmp_path / "input.json"
    input_file.write_text(json.dumps({"data": [{"title": "t", "paragraphs": paragraphs}]}), encoding="utf-8")
    examples = squad_data.read_squad_examples(input_file, is_training=False)[:TINY_QUESTIONS]
    tokenizer = FullTokenizer(str(shared_path("checkpoints", SQUAD_CKPT, "vocab.txt")), do_lower_case=True)
    features = list(squad_data.convert_examples_to_features(examples, tokenizer, is_training=False,
                                                            max_seq_length=128, doc_stride=64, max_query_length=32))
    out = model({key: np.array([getattr(f, key) for f in features], np.int32)
                 for key in ("input_ids", "input_mask", "segment_ids")}, training=False)
    logits = {key: out[key].numpy() for key in ("start_logits", "end_logits")}
    results = [RawResult(f.unique_id, s, e) for f, s, e in zip(features, logits["start_logits"],
                                                                 logits["end_logits"])]
    found = write_predictions(examples, features, results, 20, 30, True, tmp_path / "predictions.json",
                              tmp_path / "nbest.json")
    contexts = {qa["id"]: p["context"] for p in paragraphs for qa in p["qas"]}
    inputs = {"question": [e.question_text for e in examples], "context": [contexts[e.qas_id] for e in examples]}
    return inputs, features, logits, found


@pytest.mark.slow
def test_a_process_that_cannot_import_bert_tf_answers_as_the_python_pipeline(tiny_model, exported, tmp_path):
    inputs, features, logits, expected = _python_pipeline(tiny_model, tmp_path)
    got = _run_without_bert_tf(exported, inputs, tmp_path)
    assert len(features) > len(inputs["question"])  # some questions have several windows
    np.testing.assert_array_equal(got["windows/example_index"], [f.example_index for f in features])
    for key in ("start_logits", "end_logits"):
        np.testing.assert_allclose(got[f"windows/{key}"], logits[key], rtol=0, atol=1e-5, err_msg=key)
    ids = list(expected.predictions)
    for prefix in ("served", "called"):
        texts = _texts(got[f"{prefix}/answer"])
        assert texts == [expected.predictions[i] for i in ids]
        best = [expected.nbest[i][0] for i in ids]
        np.testing.assert_allclose(got[f"{prefix}/score"], [b["start_logit"] + b["end_logit"] for b in best],
                                   rtol=0, atol=1e-5)
        np.testing.assert_allclose(got[f"{prefix}/probability"], [b["probability"] for b in best], rtol=0, atol=1e-5)
        assert got[f"{prefix}/start"].dtype == got[f"{prefix}/end"].dtype == np.int32
        for context, text, start, end in zip(inputs["context"], texts, got[f"{prefix}/start"], got[f"{prefix}/end"]):
            if text in context:
                assert context[start:end] == text
    assert "served/null_score_diff" not in got  # a v1.1 export
    assert {name: got[name].item() for name in ("seq_length", "doc_stride", "max_query_length", "n_best_size",
                                                "max_answer_length", "version_2_with_negative",
                                                "null_score_diff_threshold", "do_lower_case")} == \
        {**TINY_WINDOWS, "n_best_size": 20, "max_answer_length": 30, "version_2_with_negative": False,
         "null_score_diff_threshold": 0.0, "do_lower_case": True}


@pytest.mark.slow
def test_saved_model_cli_lists_the_squad_signature(exported):
    done = subprocess.run([str(ROOT / ".venv" / "bin" / "saved_model_cli"), "show", "--dir", str(exported), "--all"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    text = done.stdout
    assert "signature_def['serving_default']" in text
    for name in ("question", "context", "answer", "start", "end", "score", "probability"):
        assert f"['{name}'] tensor_info" in text, name


@pytest.mark.slow
def test_the_served_squad_model_answers_under_load_and_each_hostile_request_gets_its_own_error(exported, tmp_path):
    questions, contexts, _ = _questions(V1)
    result = serve_briefly("squad", exported, questions[:64], contexts[:64], tmp_path)
    assert_each_hostile_request_gets_its_own_answer_or_error(result)
