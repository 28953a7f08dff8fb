"""The paper's pre-training ablations (Table 5): --objective=mlm ("No NSP") and ltr ("LTR & No NSP"),
the causal attention mask, the record of what made a checkpoint, and fine-tuning that keeps the mask;
on the shared golden records of the original create_pretraining_data."""
import json
import logging
import re

import numpy as np
import pytest

from shared_data import shared_path
from test_classifier import _slice
from test_run_pretraining import TINY, exported_weights, golden, run as run_pretraining

import bert_tf._env  # noqa: F401
import keras
import tensorflow as tf

from bert_tf.model.bert import BertModel
from bert_tf.model.configs import BertConfig, ConfigError
from bert_tf.model.heads import BertClassifierModel, BertPretrainingModel
from bert_tf.model.layers import attention_mask_adder
from bert_tf.options import OptionError, parse
from bert_tf.pretraining import input_pipeline
from bert_tf.pretraining import objective as objectives
from bert_tf.pretraining.objective_ltr import next_token_inputs, restore_original_tokens
from bert_tf.pretraining.program import PretrainingOptions, run as run_program
from bert_tf.tasks import classifier
from bert_tf.text.tokenization import load_vocab
from bert_tf.training import run_setup

RECORDS = "default_uncased"
PRETRAINED = "tf1_tiny_from_original_bert_code"


def _config(causal: bool) -> BertConfig:
    return BertConfig.from_dict({**TINY, "causal_attention": causal})


def _records(rows: int = 2) -> dict[str, np.ndarray]:
    """The first `rows` records of the golden file, in file order."""
    dataset = input_pipeline.pretraining_dataset([golden(RECORDS)], batch_size=rows, max_seq_length=128,
                                                 max_predictions_per_seq=20, is_training=False)
    return {key: value.numpy() for key, value in next(iter(dataset)).items()}


def _text_inputs(batch) -> dict[str, np.ndarray]:
    return {key: np.array(batch[key]) for key in ("input_ids", "input_mask", "segment_ids")}


def _encoder(causal: bool, dtype: str = "float32", jit: bool = False):
    keras.utils.set_random_seed(3)
    model = BertModel(_config(causal), dtype=dtype)
    return tf.function(lambda inputs: model(inputs), jit_compile=jit), model


# ---- the causal mask ------------------------------------------------------------------------------

def test_causal_adder_allows_only_earlier_real_tokens():
    mask = np.array([[1, 1, 1, 0], [1, 0, 1, 1]], np.int32)
    adder = attention_mask_adder(tf.constant(mask), causal=True).numpy()
    assert adder.shape == (2, 1, 4, 4)
    allowed = np.tril(np.ones((4, 4))) * mask[:, None, :]  # [b, i, j]: j <= i and j real
    np.testing.assert_array_equal(adder[:, 0], (1.0 - allowed) * -10000.0)
    assert attention_mask_adder(tf.constant(mask)).shape == (2, 1, 1, 4)  # the original's, unchanged


@pytest.mark.parametrize("dtype,jit", [("float32", False), ("float32", True), ("mixed_bfloat16", True),
                                       ("mixed_float16", False)])
def test_changing_later_tokens_changes_no_earlier_position_under_the_causal_mask(dtype, jit):
    inputs = _text_inputs(_records())
    changed = {**inputs, "input_ids": inputs["input_ids"].copy()}
    k = 20
    changed["input_ids"][:, k:] = (changed["input_ids"][:, k:] + 1000) % TINY["vocab_size"]
    encode, _ = _encoder(True, dtype, jit)
    before, after = encode(inputs)["sequence_output"].numpy(), encode(changed)["sequence_output"].numpy()
    np.testing.assert_array_equal(before[:, :k], after[:, :k])
    assert not np.allclose(before[:, k], after[:, k])
    encode, _ = _encoder(False, dtype, jit)  # the original's bidirectional encoder: every position sees them
    assert not np.allclose(encode(inputs)["sequence_output"][:, :k], encode(changed)["sequence_output"][:, :k])


def test_padding_still_hides_a_token_from_every_position_under_the_causal_mask():
    inputs = _text_inputs(_records())
    inputs["input_mask"][:, 3] = 0  # position 3 becomes padding: no query may read it, earlier or later
    changed = {**inputs, "input_ids": inputs["input_ids"].copy()}
    changed["input_ids"][:, 3] = 2000
    encode, _ = _encoder(True)
    before, after = encode(inputs)["sequence_output"].numpy(), encode(changed)["sequence_output"].numpy()
    keep = [i for i in range(before.shape[1]) if i != 3]
    np.testing.assert_array_equal(before[:, keep], after[:, keep])


def test_a_causal_models_pooled_output_reads_the_last_real_token():
    inputs = _text_inputs(_records())
    encode, model = _encoder(True)
    out = encode(inputs)
    last = inputs["input_mask"].sum(axis=1) - 1
    rows = np.stack([out["sequence_output"].numpy()[b, last[b]] for b in range(len(last))])[:, None, :]
    np.testing.assert_allclose(out["pooled_output"].numpy(), model.pooler(tf.constant(rows)).numpy(), atol=1e-6)


def test_causal_attention_is_written_to_bert_config_json_only_when_true():
    assert BertConfig.from_dict(TINY).to_json_string() == json.dumps(TINY, indent=2, sort_keys=True) + "\n"
    assert json.loads(_config(True).to_json_string())["causal_attention"] is True
    assert BertConfig.from_dict(json.loads(_config(True).to_json_string())).causal_attention is True
    with pytest.raises(ConfigError, match="'causal_attention' must be true or false"):
        BertConfig.from_dict({**TINY, "causal_attention": "yes"})


# ---- the objectives on real records ---------------------------------------------------------------

def test_ltr_targets_are_the_restored_original_tokens_shifted_by_one():
    batch = _records()
    summary = json.loads(shared_path("golden", "create_pretraining_data", RECORDS,
                                     f"{RECORDS}.summary.json").read_text())["first_instances_of_first_file"][0]
    inverse = {index: token for token, index in load_vocab(shared_path("vocab", "uncased", "vocab.txt")).items()}
    n = int(batch["input_mask"][0].sum())
    assert [inverse[i] for i in batch["input_ids"][0][:n]] == summary["tokens"].split()
    original = summary["tokens"].split()  # the masked text with the original's labels put back
    for position, label in zip(summary["masked_lm_positions"], summary["masked_lm_labels"].split()):
        original[position] = label
    inputs, targets, weights = _as_numpy(next_token_inputs(batch))
    assert [inverse[i] for i in inputs["input_ids"][0][:n]] == original
    assert original[:8] == ["[CLS]", "homer", "'", "s", '"', "il", "##iad", '"'] and original[8] == "is"
    np.testing.assert_array_equal(targets[0][:n - 1], inputs["input_ids"][0][1:n])
    np.testing.assert_array_equal(weights[0], np.arange(1, 128) < n)  # every position whose next token is real
    np.testing.assert_array_equal(inputs["masked_lm_positions"][0], np.arange(127))
    np.testing.assert_array_equal(inputs["segment_ids"], batch["segment_ids"])  # as the records have them


def _as_numpy(triple):
    inputs, targets, weights = triple
    return {k: np.asarray(v) for k, v in inputs.items()}, targets.numpy(), weights.numpy()


def test_restoring_ignores_the_padding_predictions():
    ids = tf.constant([[101, 103, 7, 103]])
    restored = restore_original_tokens(ids, tf.constant([[1, 3, 0]]), tf.constant([[5, 6, 9]]),
                                       tf.constant([[1.0, 1.0, 0.0]]))
    np.testing.assert_array_equal(restored.numpy(), [[101, 5, 7, 6]])


def test_mlm_objective_is_the_original_masked_lm_loss_without_next_sentence():
    batch = _records(4)
    keras.utils.set_random_seed(3)
    model = BertPretrainingModel(_config(False))
    full, full_metrics = objectives.PRETRAINING.terms_fn(model, batch, False)
    mlm, mlm_metrics = objectives.MASKED_LM.terms_fn(model, batch, False)
    assert list(mlm) == ["masked_lm_loss"] and list(mlm_metrics) == ["masked_lm_accuracy"]
    assert float(mlm["masked_lm_loss"].value()) == float(full["masked_lm_loss"].value())
    assert float(mlm_metrics["masked_lm_accuracy"].value()) == float(full_metrics["masked_lm_accuracy"].value())
    assert [float(d) for d in objectives.MASKED_LM.denominators_fn(batch)] == [float(batch["masked_lm_weights"].sum())]


def test_ltr_loss_is_the_mean_next_token_nll_over_the_real_positions():
    batch = _records(2)
    keras.utils.set_random_seed(3)
    model = BertPretrainingModel(_config(True))
    losses, _ = objectives.OBJECTIVES["ltr"].terms_fn(model, batch, False)
    inputs, targets, weights = next_token_inputs(batch)
    log_probs = model(inputs)["masked_lm_log_probs"].numpy()
    nll = -np.take_along_axis(log_probs, targets.numpy()[..., None], axis=-1)[..., 0]
    expected = (nll * weights.numpy()).sum() / weights.numpy().sum()
    np.testing.assert_allclose(float(losses["next_token_loss"].value()), expected, rtol=1e-5)
    assert float(objectives.OBJECTIVES["ltr"].denominators_fn(batch)[0]) == batch["input_mask"][:, 1:].sum()


# ---- run_pretraining.py --objective ---------------------------------------------------------------

def _train_losses(stderr: str) -> list[float]:
    return [float(x) for x in re.findall(r"step \d+/\d+ \| loss ([0-9.]+)", stderr)]


def _json(path):
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def ltr_run(tmp_path_factory):
    """A tiny run_pretraining.py --objective=ltr on the golden records (its folder and stderr)."""
    folder = tmp_path_factory.mktemp("ltr")
    done = run_pretraining(folder, "--do_train", "--do_eval", "--objective=ltr", "--seed=1")  # reproducible
    return folder, done.stderr


@pytest.mark.slow
def test_ltr_pretraining_lowers_its_loss_and_records_the_causal_objective(ltr_run):
    folder, stderr = ltr_run
    out = folder / "out"
    losses = _train_losses(stderr)
    assert len(losses) == 4 and losses[-1] < losses[0] - 0.1, losses
    results = dict(line.split(" = ") for line in (out / "eval_results.txt").read_text().splitlines())
    assert sorted(results) == ["global_step", "loss", "next_token_accuracy", "next_token_loss"]
    assert (out / "ckpt-12.index").exists()
    assert _json(out / "export" / "bert_config.json") == {**TINY, "causal_attention": True}
    assert _json(out / "export" / "pretraining.json")["objective"] == "ltr"
    assert _json(out / "pretraining.json")["objective"] == "ltr"
    assert _json(out / "model_config.json")["causal_attention"] is True
    for checkpoint in (out, out / "export" / "bert_model.ckpt", out / "ckpt-12"):
        assert run_setup.causal_attention_of(str(checkpoint)) is True
    assert run_setup.causal_attention_of(str(shared_path("checkpoints", PRETRAINED) / "bert_model.ckpt")) is False


@pytest.mark.slow
def test_mlm_pretraining_trains_no_next_sentence_head_and_records_its_objective(tmp_path):
    done = run_pretraining(tmp_path, "--do_train", "--do_eval", "--objective=mlm")
    out = tmp_path / "out"
    losses = _train_losses(done.stderr)
    assert len(losses) == 4 and losses[-1] < losses[0], losses
    assert "next_sentence" not in done.stderr
    results = dict(line.split(" = ") for line in (out / "eval_results.txt").read_text().splitlines())
    assert sorted(results) == ["global_step", "loss", "masked_lm_accuracy", "masked_lm_loss"]
    assert _json(out / "export" / "bert_config.json") == TINY  # the original's keys: a bidirectional model
    record = _json(out / "export" / "pretraining.json")
    assert record["objective"] == "mlm" and record["next_sentence_head_trained"] is False
    weights = exported_weights(out / "export")
    assert not weights["cls/seq_relationship/output_bias"].any()  # initialised to zeros, never updated
    assert not weights["bert/pooler/dense/bias"].any()
    assert weights["cls/predictions/output_bias"].any()
    # resuming these checkpoints with another objective is refused in one line
    again = run_pretraining(tmp_path, "--do_train", "--num_train_steps=15", check=False)
    last = again.stderr.strip().splitlines()[-1]
    assert again.returncode == 1 and last.startswith("run_pretraining.py: error: "), again.stderr[-2000:]
    assert "holds checkpoints of --objective=mlm, not mlm_nsp" in last


def test_bad_objective_values_get_one_readable_error(tmp_path):
    flags = [f"--bert_config_file={tmp_path / 'causal.json'}", f"--input_file={golden(RECORDS)}",
             f"--output_dir={tmp_path / 'out'}", "--do_train"]
    with pytest.raises(OptionError, match="--objective"):
        parse(PretrainingOptions, [*flags, "--objective=nsp"])
    (tmp_path / "causal.json").write_text(json.dumps({**TINY, "causal_attention": True}))
    with pytest.raises(OptionError, match="needs bidirectional attention; use --objective=ltr"):
        run_program(parse(PretrainingOptions, [*flags, "--objective=mlm"]))
    with pytest.raises(OptionError, match="--causal_attention"):
        parse(classifier.ClassifierOptions, ["--task_name=RTE", "--causal_attention=maybe"])


# ---- fine-tuning an LTR model ---------------------------------------------------------------------

@pytest.mark.slow
def test_fine_tuning_an_ltr_export_keeps_the_causal_mask_unless_told(tmp_path, ltr_run, caplog):
    export = ltr_run[0] / "out" / "export"
    data = _slice(shared_path("glue", "RTE"), tmp_path / "RTE", 9)
    common = ["--task_name=RTE", f"--data_dir={data}", "--max_seq_length=32", "--train_batch_size=4",
              "--eval_batch_size=4", "--learning_rate=1e-3", "--seed=1"]

    def run(name, init, *flags):
        return classifier.run(parse(classifier.ClassifierOptions, [
            *common, f"--init_checkpoint={init / 'bert_model.ckpt'}", f"--output_dir={tmp_path / name}", *flags]))

    trained = run("ft", export, "--do_train", "--do_eval", "--num_train_epochs=1")
    tuned = tmp_path / "ft" / "export"
    assert _json(tuned / "bert_config.json")["causal_attention"] is True
    assert _json(tmp_path / "ft" / "model_config.json")["causal_attention"] is True
    # the fine-tuned export evaluates with its mask by default (the same loss) ...
    assert run("again", tuned, "--do_eval")["eval_loss"] == pytest.approx(trained["eval_loss"], abs=1e-5)
    # ... and differently, with a warning, when asked for the bidirectional mask
    with caplog.at_level(logging.WARNING):
        bidirectional = run("bi", tuned, "--do_eval", "--causal_attention=false")
    # An LTR run trains no pooler, so how far the two masks' losses lie apart depends on the run (1e-5 to 3e-3
    # seen); an evaluation is bit-reproducible (`again` above), so any difference is the other mask's.
    assert bidirectional["eval_loss"] != trained["eval_loss"]
    assert "causal_attention" not in _json(tmp_path / "bi" / "model_config.json")
    assert "was pre-trained with causal (left-to-right) attention" in caplog.text


@pytest.mark.slow
def test_a_pretraining_runs_own_checkpoint_initialises_fine_tuning_as_its_export_does(tmp_path, ltr_run):
    """The original fine-tunes from any pre-training model.ckpt-N; ours from a run's ckpt-N: the encoder
    whole, the new head as initialised, and only for a model whose head may be missing."""
    from bert_tf.checkpoints import get_tf1_weights, load_init_checkpoint, read_tf1_checkpoint
    from bert_tf.checkpoints.restore import CheckpointLacksVariables

    out = ltr_run[0] / "out"
    data = _slice(shared_path("glue", "RTE"), tmp_path / "RTE", 9)

    def evaluate(name, init):
        return classifier.run(parse(classifier.ClassifierOptions, [
            "--task_name=RTE", f"--data_dir={data}", "--max_seq_length=32", "--eval_batch_size=4", "--seed=1",
            f"--vocab_file={out / 'export' / 'vocab.txt'}", f"--init_checkpoint={init}",
            f"--output_dir={tmp_path / name}", "--do_eval"]))

    from_ckpt = evaluate("ckpt", out / "ckpt-12")  # its config from the run's model_config.json
    assert from_ckpt["eval_loss"] == evaluate("export", out / "export" / "bert_model.ckpt")["eval_loss"]

    config = BertConfig.from_json_file(str(out / "export" / "bert_config.json"))
    exported = read_tf1_checkpoint(out / "export" / "bert_model.ckpt")
    encoder = BertModel(config, name="bert")  # what feature-based NER freezes
    encoder(_text_inputs(_records()))
    assert load_init_checkpoint(encoder, out / "ckpt-12") == "bert_tf"
    loaded = get_tf1_weights(encoder)
    assert loaded.keys() == {name for name in exported if name.startswith("bert/")}
    for name, value in loaded.items():
        np.testing.assert_array_equal(value, exported[name], err_msg=name)
    tuned = BertClassifierModel(config, num_labels=2)
    tuned(_text_inputs(_records()))
    with pytest.raises(CheckpointLacksVariables, match=r"ckpt-12 was written for a different model"):
        load_init_checkpoint(tuned, out / "ckpt-12")  # a head not named as missing is not left at random


def test_a_left_to_right_model_is_refused_by_the_hugging_face_converter_in_one_readable_error():
    import json

    from bert_tf.checkpoints import hf
    from shared_data import shared_path

    config = json.loads(shared_path("checkpoints", "tf1_tiny_from_original_bert_code", "bert_config.json").read_text())
    hf.original_config_to_hf(config)  # the bidirectional original converts
    with pytest.raises(hf.HFConversionError, match="left-to-right model .causal_attention. has no Hugging Face"):
        hf.original_config_to_hf(config | {"causal_attention": True})


@pytest.mark.slow
def test_feature_based_ner_freezes_an_ltr_export_with_its_causal_mask_unless_told(tmp_path, ltr_run):
    from bert_tf.tasks.ner import program as ner_program

    export = ltr_run[0] / "out" / "export"
    data = tmp_path / "conll"
    data.mkdir()
    text = shared_path("conll2003", "valid.txt").read_text(encoding="utf-8")
    (data / "train.txt").write_text("-DOCSTART-".join(text.split("-DOCSTART-")[:2]), encoding="utf-8")

    def task(*flags):
        options = parse(ner_program.NerOptions, [
            f"--data_dir={data}", f"--init_checkpoint={export / 'bert_model.ckpt'}", "--mode=feature_based",
            f"--output_dir={tmp_path / 'out'}", "--do_train", "--max_seq_length=32", "--features=last", *flags])
        return ner_program.make_task(ner_program.finetune.resolve(options))

    causal, told = task(), task("--causal_attention=false")
    assert causal.encoder.config.causal_attention is True
    assert told.encoder.config.causal_attention is False
    # the two masks give different frozen vectors, so they are cached under different keys
    assert causal._frozen_key("train") != told._frozen_key("train")
