"""One contender of the inference speed study (studies/tables/speed_inference.py), measured in its own process.

Every contender is a function `predict(list of strings) -> float [B, num_labels] class probabilities`, tokenization
included, built the way a user of that library serves a sentence classifier:

* ours_saved_model: `tf.saved_model.load(EXPORT/classifier)` and its `serving_default(text=...)` signature
  (TensorFlow + tensorflow-text only: this process never imports bert_tf, and checks it);
* ours_python: bert_tf's FastTokenizer (ids identical to the original's; its native engine where built) packed
  into [CLS] ... [SEP] padded to the batch's longest row, and `BertClassifierModel` loaded by
  `load_init_checkpoint`, called through a `tf.function` with a dynamic-shape input signature (no retracing);
* hf_pipeline: `transformers.pipeline("text-classification", model=HF_FOLDER, top_k=None)` on torch CPU;
* onnxruntime: the same torch model exported to ONNX, an `InferenceSession` with the default CPU provider and
  options, the folder's fast tokenizer (padding to the longest row, truncation at 128) and a numpy softmax.

Each library keeps its own thread defaults (recorded). Measured after warm-up: batch-1 latency per call over the
short and the 128-token strings (cycling through them), then batch-32 throughput on the 128-token strings. The
probabilities of fixed check sets (batch 1, batch 8 with padding, batch 32) go into OUT/result.json, and with
--reference=DIR (the HF pipeline's run) their largest difference from that run's, so that every contender is seen
to compute the same function.

    python -m bench.inference_contender --contender=onnxruntime --hf=HF_FOLDER --onnx=model.onnx \
        --inputs=inputs.json --out=DIR [--calls=300 --warmup=20 --b32_min_batches=8 --b32_min_seconds=20]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from typing import Callable

import numpy as np

from bench.result import report

CONTENDERS = ("ours_saved_model", "ours_python", "hf_pipeline", "onnxruntime")
SEQ_LENGTH = 128
Predict = Callable[[list[str]], np.ndarray]


# ---------------------------------------------------------------------------------------------- contenders

def tf_threads(tf) -> str:
    intra = tf.config.threading.get_intra_op_parallelism_threads()
    inter = tf.config.threading.get_inter_op_parallelism_threads()
    return f"TF intra-op {intra or 'default (all cores)'}, inter-op {inter or 'default (all cores)'}"


def build_saved_model(args: argparse.Namespace) -> tuple[Predict, dict]:
    """The exported end-to-end classifier: strings in, its "probabilities" output out."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer ops the SavedModel uses)

    loaded = tf.saved_model.load(args.saved_model)
    serve = loaded.signatures["serving_default"]
    if "bert_tf" in sys.modules:
        raise SystemExit("the SavedModel contender imported bert_tf: it must run on TensorFlow alone")

    def predict(texts: list[str]) -> np.ndarray:
        return serve(text=tf.constant(texts))["probabilities"].numpy()

    return predict, {"versions": f"tensorflow {tf.__version__}, tensorflow-text {tensorflow_text.__version__}",
                     "threads": tf_threads(tf), "bert_tf_imported": False}


def pack_ids(flat: np.ndarray, splits: np.ndarray, cls_id: int, sep_id: int) -> dict[str, np.ndarray]:
    """[CLS] ids [SEP] per row (ids cut to SEQ_LENGTH - 2), zero-padded to the longest row: int32 model inputs."""
    lengths = np.minimum(np.diff(splits), SEQ_LENGTH - 2)
    width = int(lengths.max()) + 2 if len(lengths) else 2
    ids = np.zeros((len(lengths), width), np.int32)
    ids[:, 0] = cls_id
    for row, (start, length) in enumerate(zip(splits[:-1], lengths)):
        ids[row, 1:1 + length] = flat[start:start + length]
        ids[row, 1 + length] = sep_id
    mask = (np.arange(width)[None, :] < (lengths + 2)[:, None]).astype(np.int32)
    return {"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids)}


def build_ours_python(args: argparse.Namespace) -> tuple[Predict, dict]:
    """FastTokenizer + BertClassifierModel from the HF folder, through one dynamic-shape tf.function."""
    from bert_tf._env import tf
    from bert_tf.checkpoints import load_init_checkpoint
    from bert_tf.model.configs import BertConfig
    from bert_tf.model.heads import BertClassifierModel
    from bert_tf.text.fast_tokenization import FastTokenizer

    folder = args.hf
    with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
        num_labels = len(json.load(f).get("id2label") or {0: 0, 1: 1})  # transformers' default: 2 labels
    model = BertClassifierModel(BertConfig.from_json_file(os.path.join(folder, "config.json")), num_labels)
    load_init_checkpoint(model, folder)
    tokenizer = FastTokenizer(os.path.join(folder, "vocab.txt"), do_lower_case=True)
    cls_id, sep_id = tokenizer.vocab["[CLS]"], tokenizer.vocab["[SEP]"]
    spec = tf.TensorSpec([None, None], tf.int32)

    @tf.function(input_signature=[spec, spec, spec])
    def serve(input_ids, input_mask, segment_ids):
        inputs = {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}
        return model(inputs, training=False)["probabilities"]

    def predict(texts: list[str]) -> np.ndarray:
        packed = pack_ids(*tokenizer.tokenize_batch_arrays(texts), cls_id, sep_id)
        return serve(packed["input_ids"], packed["input_mask"], packed["segment_ids"]).numpy()

    import bert_tf
    return predict, {"versions": f"bert_tf {bert_tf.__version__}, tensorflow {tf.__version__}",
                     "threads": tf_threads(tf), "tokenizer_engine": tokenizer.engine}


def pipeline_probabilities(outputs, label2id: dict[str, int]) -> np.ndarray:
    """The pipeline's [{label, score}, ...] per text (sorted by score) as [B, num_labels] in label-id order."""
    if outputs and isinstance(outputs[0], dict):  # one text given as a string: one list of dicts
        outputs = [outputs]
    probs = np.zeros((len(outputs), len(label2id)), np.float32)
    for row, scores in enumerate(outputs):
        for item in scores:
            probs[row, label2id[item["label"]]] = item["score"]
    return probs


def build_hf_pipeline(args: argparse.Namespace) -> tuple[Predict, dict]:
    """transformers' text-classification pipeline on torch CPU, every label's probability (top_k=None); with
    --torch_precision=int8 its Linear layers dynamically quantised (`torch.ao.quantization.quantize_dynamic`:
    int8 weights, activations quantised per batch), with bfloat16 run under CPU autocast."""
    import contextlib

    import torch
    import transformers

    pipe = transformers.pipeline("text-classification", model=args.hf, top_k=None,
                                 device="cpu")
    if args.torch_precision == "int8":
        pipe.model = torch.ao.quantization.quantize_dynamic(pipe.model, {torch.nn.Linear}, dtype=torch.qint8)
    label2id = dict(pipe.model.config.label2id)

    def precision():
        if args.torch_precision == "bfloat16":
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def predict(texts: list[str]) -> np.ndarray:
        with precision():
            if len(texts) == 1:
                return pipeline_probabilities(pipe(texts[0]), label2id)
            return pipeline_probabilities(pipe(texts, batch_size=len(texts)), label2id)

    return predict, {"versions": f"transformers {transformers.__version__}, torch {torch.__version__}",
                     "torch_precision": args.torch_precision,
                     "threads": f"torch threads {torch.get_num_threads()} (default), interop "
                                f"{torch.get_num_interop_threads()}",
                     "attention": pipe.model.config._attn_implementation}


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return (shifted / shifted.sum(axis=-1, keepdims=True)).astype(np.float32)


def build_onnxruntime(args: argparse.Namespace) -> tuple[Predict, dict]:
    """ONNX Runtime on the exported torch model with the folder's fast tokenizer; softmax in numpy."""
    import onnxruntime
    import transformers

    session = onnxruntime.InferenceSession(args.onnx, providers=["CPUExecutionProvider"])
    tokenizer = transformers.AutoTokenizer.from_pretrained(args.hf)
    names = {i.name for i in session.get_inputs()}

    def predict(texts: list[str]) -> np.ndarray:
        encoded = tokenizer(texts, padding=True, truncation=True, max_length=SEQ_LENGTH, return_tensors="np")
        feeds = {name: encoded[name].astype(np.int64) for name in names}
        return softmax(session.run(["logits"], feeds)[0])

    options = session.get_session_options()
    return predict, {"versions": f"onnxruntime {onnxruntime.__version__}, transformers {transformers.__version__} "
                                 f"(tokenizer only), tokenizer fast: {tokenizer.is_fast}",
                     "threads": f"intra-op {options.intra_op_num_threads or 'default (physical cores)'}, "
                                f"inter-op {options.inter_op_num_threads or 'default'}",
                     "graph_optimization": str(options.graph_optimization_level).split(".")[-1]}


BUILDERS = {"ours_saved_model": build_saved_model, "ours_python": build_ours_python,
            "hf_pipeline": build_hf_pipeline, "onnxruntime": build_onnxruntime}


# ---------------------------------------------------------------------------------------------- timing

def latency_figures(seconds: list[float]) -> dict:
    """p50, p90, p99, mean, min and max in milliseconds of per-call seconds."""
    ms = np.asarray(seconds) * 1000
    return {"p50_ms": float(np.percentile(ms, 50)), "p90_ms": float(np.percentile(ms, 90)),
            "p99_ms": float(np.percentile(ms, 99)), "mean_ms": float(ms.mean()), "min_ms": float(ms.min()),
            "max_ms": float(ms.max()), "calls": len(ms)}


def batch1_latency(predict: Predict, texts: list[str], calls: int, warmup: int) -> dict:
    """Per-call seconds of `calls` one-string calls cycling through `texts`, after `warmup` untimed ones."""
    for i in range(warmup):
        predict([texts[i % len(texts)]])
    seconds = []
    for i in range(calls):
        text = [texts[i % len(texts)]]
        start = time.perf_counter()
        predict(text)
        seconds.append(time.perf_counter() - start)
    return latency_figures(seconds)


def batch_throughput(predict: Predict, texts: list[str], batch: int, min_batches: int, min_seconds: float,
                     warmup: int) -> dict:
    """Sentences/s of batches of `batch` distinct strings (cycling through `texts`), timed for at least
    `min_batches` batches and `min_seconds`, after `warmup` untimed batches."""
    groups = [texts[k:k + batch] for k in range(0, len(texts) - batch + 1, batch)]
    for i in range(warmup):
        predict(groups[i % len(groups)])
    seconds: list[float] = []
    while len(seconds) < min_batches or sum(seconds) < min_seconds:
        group = groups[len(seconds) % len(groups)]
        start = time.perf_counter()
        predict(group)
        seconds.append(time.perf_counter() - start)
    total = sum(seconds)
    return {"sentences_per_s": len(seconds) * batch / total, "batches": len(seconds), "batch_size": batch,
            "seconds": total, "median_batch_s": float(np.median(seconds)), "max_batch_s": max(seconds)}


def check_probabilities(predict: Predict, inputs: dict, count: int) -> dict[str, list]:
    """Probabilities on the check sets: the first `count` short and long strings one at a time, the first 16
    short strings in batches of 8 (padding inside a batch), the first 32 long strings as one batch."""
    def rows(texts: list[str], batch: int) -> list:
        return np.concatenate([predict(texts[k:k + batch]) for k in range(0, len(texts), batch)]).tolist()

    return {"short_b1": rows(inputs["short"][:count], 1), "long_b1": rows(inputs["long"][:count], 1),
            "short_b8": rows(inputs["short"][:16], 8), "long_b32": rows(inputs["long"][:32], 32)}


def run(args: argparse.Namespace) -> dict:
    """Builds the contender, warms it up, takes the check probabilities, then the timed figures."""
    with open(args.inputs, encoding="utf-8") as f:
        inputs = json.load(f)
    start, load_start = time.perf_counter(), os.getloadavg()[0]
    predict, notes = BUILDERS[args.contender](args)
    load_s = time.perf_counter() - start
    checks = check_probabilities(predict, inputs, args.check_count)  # also the first calls' warm-up
    figures = {"b1_short": batch1_latency(predict, inputs["short"], args.calls, args.warmup),
               "b1_long": batch1_latency(predict, inputs["long"], args.calls, args.warmup),
               "b32_long": batch_throughput(predict, inputs["long"], 32, args.b32_min_batches,
                                            args.b32_min_seconds, args.b32_warmup)}
    return {"contender": args.contender, "load_s": load_s, **figures, **notes,
            "check": checks, "python": platform.python_version(), "load_start": load_start,
            "load_end": os.getloadavg()[0], "wall_s": time.perf_counter() - start}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--contender", required=True, choices=CONTENDERS)
    p.add_argument("--hf", required=True, help="the model's Hugging Face folder (weights, tokenizer files)")
    p.add_argument("--saved_model", default=None, help="the exporter's classifier/ SavedModel (ours_saved_model)")
    p.add_argument("--onnx", default=None, help="the model's ONNX file (onnxruntime; its int8 file: the same model "
                   "quantised by onnxruntime's quantize_dynamic)")
    p.add_argument("--torch_precision", default="float32", choices=("float32", "int8", "bfloat16"),
                   help="hf_pipeline: float32, dynamic int8 (quantize_dynamic) or bfloat16 autocast")
    p.add_argument("--inputs", required=True, help="inputs.json (bench/inference_setup.py)")
    p.add_argument("--reference", default=None, help="the HF pipeline's run folder: agreement is against its checks")
    p.add_argument("--out", required=True)
    p.add_argument("--calls", type=int, default=300, help="timed batch-1 calls per input kind")
    p.add_argument("--warmup", type=int, default=20, help="untimed batch-1 calls before each timing")
    p.add_argument("--b32_min_batches", type=int, default=8, help="at least this many timed batches of 32")
    p.add_argument("--b32_min_seconds", type=float, default=20.0, help="and at least this many seconds")
    p.add_argument("--b32_warmup", type=int, default=2, help="untimed batches of 32 first")
    p.add_argument("--check_count", type=int, default=16, help="strings of each kind in the batch-1 check sets")
    return p.parse_args(argv)


def max_difference(checks: dict, reference: dict) -> float:
    """The largest |p - p_ref| over every check set both hold."""
    return max((abs(a - b) for name, rows in checks.items() if name in reference
                for row, ref in zip(rows, reference[name]) for a, b in zip(row, ref)), default=0.0)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    result = run(args)
    if args.reference:
        with open(os.path.join(args.reference, "result.json"), encoding="utf-8") as f:
            result["max_abs_diff_vs_hf"] = max_difference(result["check"], json.load(f)["check"])
    report(args.out, result, quiet=("check",))
    return result


if __name__ == "__main__":
    main()
