"""Hugging Face's CoNLL-2003 logits scored as our program scores its own: `bench/_hf_ner.py` writes the logits of
each split's windows (the rows our run cached); this turns them into our predictions files through run_ner's
TaggingTask (argmax at each word's first sub-token, the same windows, the same conlleval files).

    python -m bench._ner_runs --logits_dir=DIR --ours_dir=DIR --data_dir=DIR --vocab_file=F --label_list=O,B-LOC,...
        -> OUT/eval_predictions.txt, OUT/test_predictions.txt and OUT/losses.json
"""
from __future__ import annotations

import argparse
import json
import os

import numpy as np

MAX_SEQ_LENGTH = 128


def tag_logits(logits_dir: str, ours_dir: str, conll_dir: str, vocab_file: str, labels: str,
               out: str) -> dict[str, float]:
    """HF's logits of each split through our program's TaggingTask, the predictions files written to `out`; the
    mean word loss of each split."""
    from bert_tf.tasks.ner.program import NerOptions, make_task  # TensorFlow: only in this subprocess

    task = make_task(NerOptions(data_dir=conll_dir, output_dir=ours_dir, vocab_file=vocab_file, label_list=labels,
                                max_seq_length=MAX_SEQ_LENGTH))
    losses = {}
    for split in ("eval", "predict"):
        logits = np.load(os.path.join(logits_dir, f"logits-{split}.npy"))
        losses[f"{split}_loss"] = task.postprocess(split, task.examples(split), {"logits": logits}, out)["eval_loss"]
    return losses


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description="Tag and score Hugging Face logits with our TaggingTask.")
    p.add_argument("--logits_dir", required=True, help="bench/_hf_ner.py's output: logits-eval/predict.npy")
    p.add_argument("--ours_dir", required=True, help="the run of ours whose rows HF predicted")
    p.add_argument("--data_dir", required=True, help="the CoNLL files of that run")
    p.add_argument("--vocab_file", required=True, help="the vocabulary both sides tokenized with")
    p.add_argument("--label_list", required=True, help="the tags in our run's order, comma-separated")
    p.add_argument("--out", required=True, help="where the predictions files go")
    args = p.parse_args(argv)
    losses = tag_logits(args.logits_dir, args.ours_dir, args.data_dir, args.vocab_file, args.label_list, args.out)
    with open(os.path.join(args.out, "losses.json"), "w", encoding="utf-8") as f:
        json.dump(losses, f)
    print("RESULT " + json.dumps(losses), flush=True)


if __name__ == "__main__":
    main()
