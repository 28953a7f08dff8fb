"""One run of the data-prep speed study (studies/tables/speed_data_prep.py): create_pretraining_data, ours
(faithful or sharded mode) or the original's, timed in a child process with the peak RSS of its process tree.

Ours is `python -m bert_tf.pretraining.create_pretraining_data` (what data_prep/create_pretraining_data.py runs);
the original is google-research/bert's create_pretraining_data.py run unchanged under TensorFlow 2 (python -m
bench.original_cpd). Wall seconds and peak RSS (the sum over the process and its children, sampled every 50 ms
with psutil) go to OUT/result.json with the records' count and content digest; with --same_as=DIR (the original's
run) also whether the records equal that run's.

    python -m bench.data_prep_contender --contender=faithful --input=wiki.txt --vocab=VOCAB --out=DIR
"""
from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import subprocess
import sys
import time

from bench.result import report

CONTENDERS = ("original", "faithful", "sharded")


def command(args: argparse.Namespace, output: str) -> list[str]:
    """The contender's command line: the original's flags, shared by every contender."""
    common = [f"--input_file={args.input}", f"--output_file={output}", f"--vocab_file={args.vocab}",
              "--do_lower_case=True", "--max_seq_length=128", "--max_predictions_per_seq=20",
              f"--dupe_factor={args.dupe_factor}"]
    if args.contender == "original":
        return [sys.executable, "-m", "bench.original_cpd", os.path.join(args.original, "create_pretraining_data.py"),
                *common]
    mode = ["--mode=sharded"] if args.contender == "sharded" else []
    return [sys.executable, "-m", "bert_tf.pretraining.create_pretraining_data", "--tokenizer=exact", "--overwrite",
            *mode, *common]


def measure(cmd: list[str], log: str) -> dict:
    """Wall seconds and peak RSS (MiB) of the process tree of `cmd`, its output logged to `log`."""
    import psutil

    with open(log, "wb") as out:  # a file, not a pipe: the original logs more than a pipe buffer holds
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        root, peak = psutil.Process(proc.pid), 0
        while proc.poll() is None:
            try:
                peak = max(peak, sum(p.memory_info().rss for p in [root, *root.children(recursive=True)]))
            except psutil.Error:
                pass
            time.sleep(0.05)
        wall = time.perf_counter() - start
    if proc.returncode:
        with open(log, encoding="utf-8", errors="replace") as f:
            raise SystemExit(f"exit {proc.returncode}: {' '.join(cmd)}\n{f.read()[-3000:]}")
    return {"wall_s": wall, "peak_rss_mib": peak / 2**20}


def content_digest(paths: list[str]) -> tuple[int, str]:
    """(records, sha256 of their decoded features in order): equal for the same records however framed."""
    from bert_tf.data.tfrecord import decode_example, read_records

    digest, count = hashlib.sha256(), 0
    for path in paths:
        for record in read_records(path):
            features = {k: [float(x) for x in v] if k == "masked_lm_weights" else v
                        for k, v in decode_example(record).items()}
            digest.update((json.dumps(features, sort_keys=True, separators=(",", ":")) + "\n").encode())
            count += 1
    return count, digest.hexdigest()


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--contender", required=True, choices=CONTENDERS)
    p.add_argument("--input", required=True, help="one sentence per line, blank lines between documents")
    p.add_argument("--vocab", required=True)
    p.add_argument("--dupe_factor", type=int, default=5)
    p.add_argument("--original", default=None, help="a google-research/bert checkout (contender original)")
    p.add_argument("--same_as", default=None, help="the original's run folder: are our records its records?")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    records = os.path.join(args.out, "records")
    os.makedirs(records, exist_ok=True)
    output = os.path.join(records, "data" if args.contender == "sharded" else "data.tfrecord")
    result = {"contender": args.contender, **measure(command(args, output), os.path.join(args.out, "program.log"))}
    result["instances"], result["digest"] = content_digest(sorted(glob.glob(os.path.join(records, "*.tfrecord"))))
    if args.same_as:
        with open(os.path.join(args.same_as, "result.json"), encoding="utf-8") as f:
            result["identical_to_original"] = float(json.load(f)["digest"] == result["digest"])
    for path in glob.glob(os.path.join(records, "*")):
        os.remove(path)  # the records are counted and digested; the runs keep no copy
    return report(args.out, result)


if __name__ == "__main__":
    main()
