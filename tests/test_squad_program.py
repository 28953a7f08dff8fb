"""run_squad.py as users run it: the original's span head, replay of the original's logits to its exact files,
train and predict on real SQuAD articles from the command line, v2.0's best threshold, and bad input."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from shared_data import shared_path

import bert_tf._env  # noqa: F401
import tensorflow as tf

from bert_tf.checkpoints import load_tf1_checkpoint, read_tf1_checkpoint
from bert_tf.model.configs import BertConfig
from bert_tf.options import parse
from bert_tf.tasks.squad import program
from bert_tf.training.evaluation import predict

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SQUAD_CKPT = "tf1_tiny_squad_from_original_bert_code"
V1, V2 = "squad_v1.1_dev_articles_0_2", "squad_v2.0_dev_articles_0_2"


def _replay(tmp_path, golden, *flags):
    folder = shared_path("golden", golden)
    options = parse(program.SquadOptions, [
        f"--predict_file={folder / 'input.json'}", f"--raw_logits_file={folder / 'logits.eval.jsonl.gz'}",
        f"--vocab_file={shared_path('vocab', 'uncased', 'vocab.txt')}", f"--output_dir={tmp_path}", *flags])
    return program.run(options)


def test_replaying_the_originals_v1_logits_writes_its_predictions_and_nbest_byte_for_byte(tmp_path):
    figures = _replay(tmp_path, V1)
    golden = shared_path("golden", V1)
    for name in ("predictions.json", "nbest_predictions.json"):
        assert (tmp_path / name).read_bytes() == (golden / name).read_bytes(), name
    written = json.loads((tmp_path / "eval_results.json").read_text())
    assert list(written) == ["exact_match", "f1"] and figures == written
    assert 0 < figures["exact_match"] <= figures["f1"] <= 100


def test_replaying_the_originals_v2_logits_writes_its_files_and_the_best_threshold_rederives_them(tmp_path):
    figures = _replay(tmp_path / "zero", V2, "--version_2_with_negative")
    golden = shared_path("golden", V2)
    for name in ("predictions.json", "nbest_predictions.json", "null_odds.json"):
        assert (tmp_path / "zero" / name).read_bytes() == (golden / name).read_bytes(), name
    for key in ("exact", "f1", "HasAns_exact", "HasAns_f1", "NoAns_exact", "NoAns_f1", "best_exact",
                "best_exact_thresh", "best_f1", "best_f1_thresh", "null_score_diff_threshold"):
        assert key in figures, key
    assert figures["null_score_diff_threshold"] == 0.0
    best = _replay(tmp_path / "best", V2, "--version_2_with_negative", "--null_score_diff_threshold=best")
    assert best["null_score_diff_threshold"] == figures["best_f1_thresh"]
    predictions = json.loads((tmp_path / "best" / "predictions.json").read_text())
    odds = json.loads((tmp_path / "best" / "null_odds.json").read_text())
    assert all((text == "") == (odds[qid] > figures["best_f1_thresh"]) for qid, text in predictions.items())


def test_raw_logits_of_other_windows_are_refused_naming_both(tmp_path):
    with pytest.raises(Exception, match=r"raw_logits_file=.*1192 windows .* not the 2395 windows of --predict_file"):
        _replay(tmp_path, V1, "--max_seq_length=128", "--doc_stride=64", "--max_query_length=32")


def test_the_original_span_head_reproduces_its_start_and_end_logits_to_1e6(float64_policy):
    folder = shared_path("checkpoints", SQUAD_CKPT)
    ref = json.loads((folder / "reference.json").read_text())
    task = program.make_task(parse(program.SquadOptions, [
        f"--vocab_file={folder / 'vocab.txt'}", f"--output_dir={folder}", "--predict_file=unused.json",
        "--max_seq_length=16", "--max_query_length=4"]))
    model = task.build_model(BertConfig.from_json_file(folder / "bert_config.json"))
    load_tf1_checkpoint(model, folder / "bert_model.ckpt")
    inputs = {k: np.asarray(ref["inputs"][k], np.int32) for k in ("input_ids", "input_mask", "segment_ids")}
    inputs["unique_ids"] = np.arange(3, dtype=np.int32)
    out = predict(tf.distribute.get_strategy(), model, lambda: tf.data.Dataset.from_tensor_slices(inputs), 3, 2,
                  task.prediction_keys, task.passthrough_keys)
    for key in ("start_logits", "end_logits"):
        np.testing.assert_allclose(out[key], ref["outputs"][key], rtol=0, atol=1e-6, err_msg=key)


def _articles(tmp_path, version: str, train_paragraphs=slice(0, 3), predict_paragraphs=slice(3, 5)):
    """Train and predict files from real SQuAD dev paragraphs (train keeps each question's first answer)."""
    source = json.loads(shared_path("squad", f"dev-v{version}.json").read_text(encoding="utf-8"))
    article = source["data"][0]
    train = [dict(p, qas=[dict(qa, answers=qa["answers"][:1]) for qa in p["qas"]])
             for p in article["paragraphs"][train_paragraphs]]
    files = {}
    for name, paragraphs in (("train", train), ("predict", article["paragraphs"][predict_paragraphs])):
        files[name] = tmp_path / f"{name}.json"
        files[name].write_text(json.dumps({"version": version, "data": [dict(article, paragraphs=paragraphs)]}))
    return files


def _command(tmp_path, files, *flags):
    folder = shared_path("checkpoints", SQUAD_CKPT)
    return [sys.executable, os.path.join(REPO, "run_squad.py"), f"--vocab_file={folder / 'vocab.txt'}",
            f"--bert_config_file={folder / 'bert_config.json'}", f"--init_checkpoint={folder / 'bert_model.ckpt'}",
            f"--train_file={files['train']}", f"--predict_file={files['predict']}", f"--output_dir={tmp_path / 'out'}",
            "--max_seq_length=128", "--doc_stride=64", "--max_query_length=32", "--train_batch_size=8",
            "--predict_batch_size=8", "--learning_rate=1e-3", "--num_train_epochs=1", "--seed=1", *flags]


@pytest.mark.slow
def test_v1_trains_and_predicts_real_articles_from_the_command_line_with_tensorboard(tmp_path):
    files = _articles(tmp_path, "1.1")
    done = subprocess.run(_command(tmp_path, files, "--do_train", "--do_predict", "--save_checkpoints_steps=2"),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    out = tmp_path / "out"
    questions = [qa["id"] for p in json.loads(files["predict"].read_text())["data"][0]["paragraphs"]
                 for qa in p["qas"]]
    predictions = json.loads((out / "predictions.json").read_text())
    assert list(predictions) == questions
    nbest = json.loads((out / "nbest_predictions.json").read_text())
    assert all(1 <= len(nbest[q]) <= 20 for q in questions)
    figures = json.loads((out / "eval_results.json").read_text())
    assert set(figures) == {"exact_match", "f1"}
    raw = [json.loads(line) for line in (out / "raw_logits.jsonl").read_text().splitlines()]
    assert [r["unique_id"] for r in raw] == list(range(1000000000, 1000000000 + len(raw)))
    assert all(len(r["start_logits"]) == len(r["end_logits"]) == 128 for r in raw)
    assert (out / "export" / "bert_model.ckpt.index").exists()
    exported = {name for name, _ in tf.train.list_variables(str(out / "export" / "bert_model.ckpt"))}
    assert {"cls/squad/output_weights", "cls/squad/output_bias"} <= exported
    start = read_tf1_checkpoint(str(shared_path("checkpoints", SQUAD_CKPT) / "bert_model.ckpt"))
    trained = read_tf1_checkpoint(str(out / "export" / "bert_model.ckpt"))
    for name in ("bert/pooler/dense/kernel", "bert/pooler/dense/bias"):  # no gradient, no decay: as the original
        np.testing.assert_array_equal(trained[name], start[name], err_msg=name)
    assert np.abs(trained["cls/squad/output_weights"] - start["cls/squad/output_weights"]).max() > 1e-4
    tags = _scalar_tags(out)
    assert {"train/loss", "train/learning_rate", "predict/exact_match", "predict/f1"} <= tags, tags

    replay = tmp_path / "replay"
    done = subprocess.run([sys.executable, os.path.join(REPO, "run_squad.py"), f"--predict_file={files['predict']}",
                           f"--raw_logits_file={out / 'raw_logits.jsonl'}", "--max_seq_length=128", "--doc_stride=64",
                           "--max_query_length=32", f"--vocab_file={shared_path('checkpoints', SQUAD_CKPT, 'vocab.txt')}",
                           f"--output_dir={replay}"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    for name in ("predictions.json", "nbest_predictions.json", "eval_results.json"):
        assert (replay / name).read_bytes() == (out / name).read_bytes(), name


def _scalar_tags(out) -> set[str]:
    tags = set()
    for folder in ("train", "predict"):
        for path in (out / folder).glob("events.out.tfevents.*"):
            for event in tf.compat.v1.train.summary_iterator(str(path)):
                tags |= {f"{folder}/{value.tag}" for value in event.summary.value}
    return tags


BAD_INPUT = {
    "not squad-shaped": (["--do_predict"], '{"data": [{"title": "x", "paragraphs": [{"context": "c", "qas": '
                         '[{"id": "1", "question": 7}]}]}]}', "data[0].paragraphs[0].qas[0].question should be a str, "
                         "found int"),
    "query longer than the sequence": (["--do_predict", "--max_seq_length=64", "--max_query_length=61"], None,
                                       "--max_seq_length=64 must be greater than --max_query_length=61 + 3"),
    "threshold best without v2": (["--do_predict", "--null_score_diff_threshold=best"], None,
                                  "--null_score_diff_threshold=best needs --version_2_with_negative"),
    "empty context": (["--do_predict"], '{"data": [{"title": "x", "paragraphs": [{"context": " ", "qas": []}]}]}',
                      "data[0].paragraphs[0].context is empty"),
    "no predict file": (["--do_predict", "--predict_file="], None, "--predict_file is required with --do_predict"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUT))
def test_bad_input_ends_in_one_readable_line(tmp_path, case):
    flags, predict_text, message = BAD_INPUT[case]
    files = _articles(tmp_path, "1.1")
    if predict_text is not None:
        files["predict"].write_text(predict_text)
    done = subprocess.run(_command(tmp_path, files, *flags), capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("run_squad.py: error: ") and message in last, last


def test_an_answer_not_at_its_answer_start_is_skipped_and_counted_as_the_original(tmp_path, caplog):
    from bert_tf.tasks.squad.data import read_squad_examples

    files = _articles(tmp_path, "1.1")
    dataset = json.loads(files["train"].read_text())
    qas = [qa for p in dataset["data"][0]["paragraphs"] for qa in p["qas"]]
    qas[0]["answers"][0]["text"] = "Zzyzx"  # not what the context has at answer_start
    qas[1]["answers"][0]["answer_start"] = 10 ** 6  # past the end of the context
    files["train"].write_text(json.dumps(dataset))
    examples = read_squad_examples(files["train"], is_training=True)
    assert [e.qas_id for e in examples] == [qa["id"] for qa in qas[2:]]
    assert f"skipped 2 of {len(qas)} training questions" in caplog.text


@pytest.mark.slow
@pytest.mark.parametrize("version", ["1.1", "2.0"])
def test_tfds_source_gives_the_predictions_and_figures_of_the_json_file(tmp_path, version):
    from tfds_fixture import build_local_squad

    files = _articles(tmp_path, version)
    data_dir = build_local_squad(version, tmp_path / "tfds", files["train"].read_bytes(),
                                 files["predict"].read_bytes())
    v2 = ["--version_2_with_negative"] if version == "2.0" else []
    results = {}
    for source, flags in (("json", [f"--predict_file={files['predict']}"]),
                          ("tfds", [f"--tfds_name=squad/v{version}", f"--tfds_data_dir={data_dir}"])):
        command = [flag for flag in _command(tmp_path / source, files, "--do_predict", *v2)
                   if not flag.startswith(("--train_file", "--predict_file"))] + flags
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        out = tmp_path / source / "out"
        results[source] = [json.loads((out / name).read_text()) for name in ("predictions.json", "eval_results.json")]
    assert results["tfds"] == results["json"]
    assert len(results["json"][0]) >= 10
