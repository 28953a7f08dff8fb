"""End-to-end task SavedModels (classifier, tagger, multiple choice, fill-mask, the encoder's `mlm`): strings in, answers out,
loaded by a process that cannot import bert_tf, equal to the Python model fed by the exact tokenizer."""
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from serving_host import assert_each_hostile_request_gets_its_own_answer_or_error, serve_briefly
from shared_data import shared_path

import bert_tf._env  # noqa: F401
import tensorflow as tf

from bert_tf import checkpoints
from bert_tf.checkpoints.model_folder import LABELS_FILE, labels_text
from bert_tf.export import program
from bert_tf.model import heads
from bert_tf.model.configs import BertConfig
from bert_tf.options import parse
from bert_tf.text.packing import pack
from bert_tf.text.tokenization import FullTokenizer

ROOT = pathlib.Path(__file__).resolve().parent.parent
CLASSIFIER = "tf1_tiny_classifier_from_original_bert_code"
PRETRAINED = "tf1_tiny_from_original_bert_code"
CONLL_LABELS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC")
SEQ = 48


def _export(init_checkpoint, output_dir, *flags: str) -> pathlib.Path:
    program.run(parse(program.ExportOptions, [f"--init_checkpoint={init_checkpoint}", f"--output_dir={output_dir}",
                                               f"--seq_length={SEQ}", *flags]))
    return pathlib.Path(output_dir)


def _mrpc(rows: int = 6) -> tuple[list[str], list[str]]:
    lines = shared_path("glue", "MRPC", "dev.tsv").read_text(encoding="utf-8-sig").splitlines()[1:rows + 1]
    return [line.split("\t")[3] for line in lines], [line.split("\t")[4] for line in lines]


def _conll_sentences(count: int = 6) -> list[str]:
    sentences, words = [], []
    for line in shared_path("conll2003", "valid.txt").read_text(encoding="utf-8").splitlines():
        if line.startswith("-DOCSTART-"):
            continue
        if line.strip():
            words.append(line.split()[0])
        elif words:
            sentences.append(" ".join(words))
            words = []
    return sentences[:count - 1] + [max(sentences, key=len)]  # the longest is cut by SEQ


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> dict[str, pathlib.Path]:
    """Each task's SavedModels from real checkpoints: the original's tiny classifier (with label names
    beside it), a tagger folder written by our exporter of run_ner's layout, the pre-trained tiny model."""
    root = tmp_path_factory.mktemp("exported")
    classifier = root / "classifier_ckpt"
    classifier.mkdir()
    for name in os.listdir(shared_path("checkpoints", CLASSIFIER)):
        (classifier / name).symlink_to(shared_path("checkpoints", CLASSIFIER, name))
    (classifier / LABELS_FILE).write_text(labels_text(["contradiction", "entailment", "neutral"]), encoding="utf-8")
    pretrained = shared_path("checkpoints", PRETRAINED)
    config = BertConfig.from_json_file(str(pretrained / "bert_config.json"))
    tagger = heads.BertTokenClassifierModel(config, num_labels=len(CONLL_LABELS))
    checkpoints.load_init_checkpoint(tagger, str(pretrained / "bert_model.ckpt"),
                                     allow_missing=["cls/token_classification/*"])
    checkpoints.export_original_folder(tagger, config, root / "tagger_ckpt", str(pretrained / "vocab.txt"),
                                       {LABELS_FILE: labels_text(CONLL_LABELS)})
    chooser = heads.BertMultipleChoiceModel(config)
    checkpoints.load_init_checkpoint(chooser, str(pretrained / "bert_model.ckpt"),
                                     allow_missing=["cls/multiple_choice/*"])
    checkpoints.export_original_folder(chooser, config, root / "choice_ckpt", str(pretrained / "vocab.txt"))
    return {"classifier": _export(classifier, root / "cls", "--saved_models=task"),
            "tagger": _export(root / "tagger_ckpt", root / "tag", "--saved_models=task"),
            "multiple_choice": _export(root / "choice_ckpt", root / "choice", "--saved_models=task"),
            "fill_mask": _export(pretrained, root / "mlm", "--saved_models=encoder,task"),
            "checkpoints": {"classifier": classifier, "tagger": root / "tagger_ckpt", "choice": root / "choice_ckpt",
                            "pretrained": pretrained}}


# Runs in a fresh interpreter that cannot import bert_tf (-I, bert_tf blocked): each task model's answers.
_CLEAN_PROCESS = textwrap.dedent("""
    import json, sys
    sys.modules["bert_tf"] = None
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer's ops)
    texts = json.load(open("texts.json"))
    cls, tag, fill, choose = (tf.saved_model.load(p) for p in sys.argv[1:5])
    single = cls.signatures["serving_default"](text=tf.constant(texts["a"]))
    pair = cls.signatures["serving_pair"](text_a=tf.constant(texts["a"]), text_b=tf.constant(texts["b"]))
    tags = tag.signatures["serving_default"](text=tf.constant(texts["sentences"]))
    filled = fill.signatures["serving_default"](text=tf.constant(texts["masked"]))
    chosen = choose.signatures["serving_default"](**{k: tf.constant(v) for k, v in texts["choice"].items()})
    out = {**{"single/" + k: v.numpy() for k, v in single.items()}, **{"pair/" + k: v.numpy() for k, v in pair.items()},
           **{"tags/" + k: v.numpy() for k, v in tags.items()}, **{"fill/" + k: v.numpy() for k, v in filled.items()},
           **{"choice/" + k: v.numpy() for k, v in chosen.items()}}
    out["labels"] = cls.labels.numpy()
    assert not [m for m, v in sys.modules.items() if m.startswith("bert_tf") and v is not None]
    np.savez("outputs.npz", **{k: (v.astype(str) if v.dtype == object else v) for k, v in out.items()})
""")

MASKED = ["the man went to the [MASK] and bought a [MASK] of milk.", "[MASK] is a city in france.", "no mask at all"]


@pytest.fixture(scope="module")
def served(exported, tmp_path_factory) -> dict:
    cwd = tmp_path_factory.mktemp("clean")
    a, b = _mrpc()
    import json
    (cwd / "texts.json").write_text(json.dumps({"a": a, "b": b, "sentences": _conll_sentences(), "masked": MASKED,
                                                "choice": _choices()}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    paths = [str(exported["classifier"] / "classifier"), str(exported["tagger"] / "tagger"),
             str(exported["fill_mask"] / "fill_mask"), str(exported["multiple_choice"] / "multiple_choice")]
    done = subprocess.run([sys.executable, "-I", "-c", _CLEAN_PROCESS, *paths], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(np.load(cwd / "outputs.npz"))


def _tokenizer(name: str) -> FullTokenizer:
    return FullTokenizer(str(shared_path("checkpoints", name, "vocab.txt")), do_lower_case=True)


def _classifier_reference(exported, a, b=None) -> np.ndarray:
    folder = exported["checkpoints"]["classifier"]
    model = heads.BertClassifierModel(BertConfig.from_json_file(str(folder / "bert_config.json")), num_labels=3)
    checkpoints.load_init_checkpoint(model, str(folder / "bert_model.ckpt"))
    tokenizer = _tokenizer(CLASSIFIER)
    rows = [pack(tokenizer.tokenize(x), tokenizer.tokenize(y) if b else None, SEQ, tokenizer)
            for x, y in zip(a, b or a)]
    inputs = {k: np.array([getattr(r, k) for r in rows], np.int32) for k in ("input_ids", "input_mask", "segment_ids")}
    return model(inputs, training=False)["probabilities"].numpy()


@pytest.mark.slow
def test_the_classifier_saved_model_gives_the_python_models_probabilities_and_the_runs_label_names(exported, served):
    a, b = _mrpc()
    for key, reference in (("single", _classifier_reference(exported, a)),
                           ("pair", _classifier_reference(exported, a, b))):
        np.testing.assert_allclose(served[f"{key}/probabilities"], reference, atol=1e-5)
        names = np.array(["contradiction", "entailment", "neutral"])
        assert list(served[f"{key}/label"]) == list(names[reference.argmax(1)])
        assert list(served[f"{key}/label_id"]) == list(reference.argmax(1))
    assert list(served["labels"]) == ["contradiction", "entailment", "neutral"]


def _tagger_reference(exported, sentences: list[str]) -> tuple[list[list[int]], list[np.ndarray]]:
    """run_ner's labelling, sentence context: first sub-token of each word ([UNK] for none), argmax."""
    folder = exported["checkpoints"]["tagger"]
    model = heads.BertTokenClassifierModel(BertConfig.from_json_file(str(folder / "bert_config.json")),
                                           num_labels=len(CONLL_LABELS))
    checkpoints.load_init_checkpoint(model, str(folder / "bert_model.ckpt"))
    tokenizer = _tokenizer(PRETRAINED)
    tags, probabilities = [], []
    for sentence in sentences:
        pieces, firsts = [], []
        for word in sentence.split():
            firsts.append(1 + len(pieces))
            pieces += tokenizer.tokenize(word) or ["[UNK]"]
        row = pack(pieces, None, SEQ, tokenizer)
        inputs = {k: np.array([getattr(row, k)], np.int32) for k in ("input_ids", "input_mask", "segment_ids")}
        logits = model(inputs, training=False)["logits"].numpy()[0]
        kept = [f for f in firsts if f < SEQ - 1]
        tags.append([int(logits[f].argmax()) for f in kept])
        probabilities.append(tf.nn.softmax(logits[kept]).numpy())
    return tags, probabilities


@pytest.mark.slow
def test_the_tagger_saved_model_tags_each_word_on_its_first_sub_token_as_run_ner(exported, served):
    sentences = _conll_sentences()
    tags, probabilities = _tagger_reference(exported, sentences)
    for row, sentence in enumerate(sentences):
        words = sentence.split()
        count, tagged = served["tags/word_count"][row], served["tags/tagged_count"][row]
        assert count == len(words) and list(served["tags/words"][row][:count]) == words
        assert tagged == len(tags[row])
        assert list(served["tags/tag_ids"][row][:tagged]) == tags[row]
        assert list(served["tags/tags"][row][:tagged]) == [CONLL_LABELS[t] for t in tags[row]]
        np.testing.assert_allclose(served["tags/probabilities"][row][:tagged], probabilities[row], atol=1e-5)
        assert set(served["tags/tag_ids"][row][tagged:]) <= {-1} and set(served["tags/tags"][row][tagged:]) <= {""}
    assert served["tags/tagged_count"][-1] < served["tags/word_count"][-1]  # the longest sentence was cut


def _fill_reference(exported, text: str) -> tuple[list[int], np.ndarray]:
    """[MASK] positions and the masked-LM probabilities there, the text around each mask tokenized alone."""
    folder = exported["checkpoints"]["pretrained"]
    model = heads.BertPretrainingModel(BertConfig.from_json_file(str(folder / "bert_config.json")))
    checkpoints.load_init_checkpoint(model, str(folder / "bert_model.ckpt"))
    tokenizer = _tokenizer(PRETRAINED)
    pieces = []
    for i, part in enumerate(text.split("[MASK]")):
        pieces += (["[MASK]"] if i else []) + tokenizer.tokenize(part)
    row = pack(pieces, None, SEQ, tokenizer)
    positions = [i for i, t in enumerate(row.input_ids) if t == tokenizer.vocab["[MASK]"]]
    inputs = {k: np.array([getattr(row, k)], np.int32) for k in ("input_ids", "input_mask", "segment_ids")}
    inputs["masked_lm_positions"] = np.array([positions or [0]], np.int32)
    logits = model(inputs, training=False)["masked_lm_logits"].numpy()[0]
    return positions, tf.nn.softmax(logits).numpy()


@pytest.mark.slow
def test_the_fill_mask_saved_model_gives_the_masked_lm_heads_top_tokens_for_each_mask(exported, served):
    vocab = {i: t for t, i in _tokenizer(PRETRAINED).vocab.items()}
    for row, text in enumerate(MASKED):
        positions, probabilities = _fill_reference(exported, text)
        assert served["fill/mask_count"][row] == len(positions) == text.count("[MASK]")
        for m in range(len(positions)):
            best = np.argsort(-probabilities[m], kind="stable")[:5]
            np.testing.assert_allclose(served["fill/probabilities"][row, m], probabilities[m][best], atol=1e-6)
            got = served["fill/token_ids"][row, m]
            np.testing.assert_allclose(probabilities[m][got], probabilities[m][best], atol=1e-6)  # ties may swap
            assert list(served["fill/tokens"][row, m]) == [vocab[int(i)] for i in got]
        assert set(served["fill/tokens"][row, len(positions):].ravel()) <= {""}


@pytest.mark.slow
def test_the_encoders_mlm_sub_object_gives_the_masked_lm_logits_of_tf_hub(exported):
    encoder = tf.saved_model.load(str(exported["fill_mask"] / "encoder"))
    text = MASKED[0]
    positions, probabilities = _fill_reference(exported, text)
    tokenizer = _tokenizer(PRETRAINED)
    pieces = []
    for i, part in enumerate(text.split("[MASK]")):
        pieces += (["[MASK]"] if i else []) + tokenizer.tokenize(part)
    row = pack(pieces, None, SEQ, tokenizer)
    out = encoder.mlm({"input_word_ids": tf.constant([row.input_ids], tf.int32),
                       "input_mask": tf.constant([row.input_mask], tf.int32),
                       "input_type_ids": tf.constant([row.segment_ids], tf.int32),
                       "masked_lm_positions": tf.constant([positions], tf.int32)})
    np.testing.assert_allclose(tf.nn.softmax(out["mlm_logits"][0]).numpy(), probabilities, atol=1e-6)
    assert set(out) >= {"pooled_output", "sequence_output", "encoder_outputs", "mlm_logits"}


def _choices() -> dict[str, list]:
    """Real MRPC sentences as contexts and endings, one question empty, one long enough to be truncated."""
    a, b = _mrpc(8)
    return {"context": a[:3], "question": ["", "which one follows ?", " ".join(b)],
            "choices": [[b[0], b[3], b[4], b[5]], [b[1], b[6], b[7], b[0]], [b[2], a[7], b[7], b[4]]]}


@pytest.mark.slow
def test_the_multiple_choice_saved_model_scores_each_choice_as_run_swag_packs_it(exported, served):
    folder = exported["checkpoints"]["choice"]
    model = heads.BertMultipleChoiceModel(BertConfig.from_json_file(str(folder / "bert_config.json")))
    checkpoints.load_init_checkpoint(model, str(folder / "bert_model.ckpt"))
    tokenizer = _tokenizer(PRETRAINED)
    texts = _choices()
    for row, (context, question, endings) in enumerate(zip(texts["context"], texts["question"], texts["choices"])):
        packed = [pack(tokenizer.tokenize(context), tokenizer.tokenize(question) + tokenizer.tokenize(ending), SEQ,
                       tokenizer) for ending in endings]
        inputs = {k: np.array([[getattr(p, k) for p in packed]], np.int32)
                  for k in ("input_ids", "input_mask", "segment_ids")}
        reference = model(inputs, training=False)["probabilities"].numpy()[0]
        np.testing.assert_allclose(served["choice/probabilities"][row], reference, atol=1e-5)
        assert served["choice/choice"][row] == reference.argmax()
        assert served["choice/answer"][row] == endings[reference.argmax()]


@pytest.mark.slow
def test_saved_model_cli_lists_the_classifiers_single_and_pair_signatures(exported):
    done = subprocess.run([str(ROOT / ".venv" / "bin" / "saved_model_cli"), "show", "--dir",
                           str(exported["classifier"] / "classifier"), "--all"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    for signature, inputs in (("serving_default", ["text"]), ("serving_pair", ["text_a", "text_b"])):
        block = done.stdout.split(f"signature_def['{signature}']")[1].split("signature_def[")[0]
        assert all(f"inputs['{name}']" in block for name in inputs)
        assert all(f"outputs['{name}']" in block for name in ("probabilities", "label", "label_id", "logits"))


def test_asking_for_a_task_model_of_a_checkpoint_without_a_head_is_one_error(tmp_path):
    config = BertConfig.from_json_file(str(shared_path("checkpoints", PRETRAINED, "bert_config.json")))
    encoder_only = tmp_path / "bare"
    from bert_tf.model.bert import BertModel

    model = BertModel(config)
    checkpoints.export_original_folder(model, config, encoder_only,
                                       str(shared_path("checkpoints", PRETRAINED, "vocab.txt")))
    with pytest.raises(program.ExportError, match="has no task head"):
        _export(encoder_only, tmp_path / "out", "--saved_models=task")
    with pytest.raises(program.ExportError, match="choose among encoder, preprocessor, task"):
        _export(encoder_only, tmp_path / "out", "--saved_models=encoder,everything")
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_the_served_classifier_answers_under_load_and_each_hostile_request_gets_its_own_error(exported, tmp_path):
    a, b = _mrpc()
    result = serve_briefly("classifier", exported["classifier"] / "classifier", a, b, tmp_path)
    assert_each_hostile_request_gets_its_own_answer_or_error(result)


_PROBABILITIES = textwrap.dedent("""
    import json, sys
    sys.modules["bert_tf"] = None
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401
    texts = json.load(open("texts.json"))
    signature = tf.saved_model.load(sys.argv[1]).signatures["serving_pair"]
    out = signature(text_a=tf.constant(texts["a"]), text_b=tf.constant(texts["b"]))
    np.savez("outputs.npz", probabilities=out["probabilities"].numpy(), outputs=sorted(out),
             dtypes=[str(signature.structured_outputs[k].dtype.name) for k in sorted(out)])
""")


@pytest.mark.slow
def test_a_bfloat16_classifier_keeps_the_signature_and_the_float32_probabilities_within_bfloat16_rounding(
        exported, tmp_path):
    import json
    half = _export(exported["checkpoints"]["classifier"], tmp_path / "bf16", "--saved_models=task",
                   "--precision=bfloat16")
    a, b = _mrpc()
    (tmp_path / "texts.json").write_text(json.dumps({"a": a, "b": b}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    got = {}
    for name, folder in (("float32", exported["classifier"]), ("bfloat16", half)):
        done = subprocess.run([sys.executable, "-I", "-c", _PROBABILITIES, str(folder / "classifier")], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        got[name] = dict(np.load(tmp_path / "outputs.npz"))
    assert list(got["bfloat16"]["outputs"]) == list(got["float32"]["outputs"])
    assert list(got["bfloat16"]["dtypes"]) == list(got["float32"]["dtypes"])  # float32 outputs, same names
    difference = np.abs(got["bfloat16"]["probabilities"] - got["float32"]["probabilities"]).max()
    assert 0 < difference <= 0.02, difference  # probabilities: bfloat16's 0.4% per rounding, far from 0.02
