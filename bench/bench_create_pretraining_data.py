"""Benchmark: create_pretraining_data on the shared wiki corpus, faithful and sharded modes.

  python bench/bench_create_pretraining_data.py [--reference=/work/ref/bert/create_pretraining_data.py]
      [--repeat=10] [--workdir=DIR] [--tokenizer=exact]

Corpus preparation (deterministic, inside this file): every `<doc>` of shared data/corpus/wiki in
sorted file order; the `<doc>`/`</doc>` lines and the title line after `<doc ...>` are dropped; every
other non-empty line is a paragraph, split into sentences after `.`, `!` or `?` (optionally followed by
closing quotes/brackets) when whitespace and then an ASCII capital, digit or opening quote follow,
except after a single capital letter or a few abbreviations (Mr, Dr, St, ...). Documents without
sentences are skipped; a blank line separates documents. This is close to, not the same as, the rule
the reference figure used (7.07 MiB, 2,847 docs, 63,709 sentences: a longer abbreviation list, curly
quotes); the counts of ours are printed, and the reference is re-run on OUR file for the ratios.

Measures wall time and peak RSS of the whole process tree (sum over the process and its children,
sampled every 50 ms with psutil) for: the original (--reference), faithful mode, sharded mode, and
sharded mode on the corpus repeated --repeat times (RSS should stay flat). With --reference, also checks
that faithful mode's records equal the original's (content digest), and writes docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

import psutil  # noqa: E402

from bench._report import write_section  # noqa: E402
from bert_tf.data.tfrecord import decode_example, read_records  # noqa: E402

SHARED = os.environ.get("BERT_TF_SHARED", os.path.join(os.path.dirname(REPO), "shared"))
ABBREVIATIONS = {"Mr", "Mrs", "Ms", "Dr", "St", "Jr", "Sr", "Prof", "Gen", "Col", "No", "Vol", "vs", "etc",
                 "Inc", "Ltd", "Co", "Mt", "Fig", "ca", "c", "e.g", "i.e"}
_BOUNDARY = re.compile(r"""([.!?]+["')\]]*)\s+(?=["'(\[]?[A-Z0-9])""")


def split_sentences(paragraph: str) -> list[str]:
    """The simple, deterministic sentence rule described in the module docstring."""
    text = " ".join(paragraph.split())
    sentences, start = [], 0
    for m in _BOUNDARY.finditer(text):
        before = text[start:m.start(1)].rsplit(" ", 1)[-1]
        if m.group(1) == "." and (before in ABBREVIATIONS or (len(before) == 1 and before.isupper())):
            continue
        sentences.append(text[start:m.end(1)])
        start = m.end()
    if text[start:].strip():
        sentences.append(text[start:])
    return sentences


def prepare_wiki(path: str) -> dict:
    """WikiExtractor files -> one sentence per line, blank line between documents."""
    docs = sentences = 0
    with open(path, "w", encoding="utf-8") as out:
        for name in sorted(glob.glob(os.path.join(SHARED, "data", "corpus", "wiki", "*", "wiki_*"))):
            doc, expect_title = [], False
            for line in open(name, encoding="utf-8"):
                line = line.strip()
                if line.startswith("<doc "):
                    doc, expect_title = [], True
                elif line.startswith("</doc>"):
                    if doc:
                        out.write("\n".join(doc) + "\n\n")
                        docs, sentences = docs + 1, sentences + len(doc)
                elif line and expect_title:
                    expect_title = False
                elif line:
                    doc.extend(split_sentences(line))
    return {"bytes": os.path.getsize(path), "documents": docs, "sentences": sentences}


def measure(cmd: list[str]) -> dict:
    """Wall time and peak RSS (MiB) of the process tree of `cmd`."""
    # stderr to a file, not a pipe: the original logs more than a pipe buffer holds and would block.
    log = tempfile.TemporaryFile()
    start = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, cwd=REPO)
    root, peak = psutil.Process(proc.pid), 0
    while proc.poll() is None:
        try:
            rss = sum(p.memory_info().rss for p in [root, *root.children(recursive=True)])
            peak = max(peak, rss)
        except psutil.Error:
            pass
        time.sleep(0.05)
    wall = time.time() - start
    if proc.returncode != 0:
        log.seek(0)
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{log.read().decode()[-3000:]}")
    return {"wall_s": wall, "peak_rss_mib": peak / 2**20}


def content_digest(paths: list[str]) -> tuple[int, str]:
    h, n = hashlib.sha256(), 0
    for path in paths:
        for record in read_records(path):
            d = {k: [float(x) for x in v] if k == "masked_lm_weights" else v
                 for k, v in decode_example(record).items()}
            h.update((json.dumps(d, sort_keys=True, separators=(",", ":")) + "\n").encode())
            n += 1
    return n, h.hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reference", help="path of the original create_pretraining_data.py to run side by side")
    ap.add_argument("--repeat", type=int, default=10, help="input repetitions for the flat-RSS run (0: skip)")
    ap.add_argument("--workdir", help="folder for inputs/outputs (default: a temp folder, removed)")
    ap.add_argument("--tokenizer", default="exact", choices=["exact", "fast"])
    ap.add_argument("--no_report", action="store_true", help="do not write docs/benchmarks.md")
    args = ap.parse_args()
    tmp = tempfile.TemporaryDirectory() if not args.workdir else None
    work = args.workdir or tmp.name
    os.makedirs(work, exist_ok=True)
    corpus = os.path.join(work, "wiki.txt")
    info = prepare_wiki(corpus)
    print(f"corpus: {info['bytes'] / 2**20:.2f} MiB, {info['documents']} docs, {info['sentences']} sentences")
    vocab = os.path.join(SHARED, "data", "vocab", "uncased", "vocab.txt")
    common = [f"--vocab_file={vocab}", "--do_lower_case=True", "--max_seq_length=128",
              "--max_predictions_per_seq=20", "--dupe_factor=5"]
    ours = [sys.executable, os.path.join(REPO, "data_prep", "create_pretraining_data.py"),
            f"--tokenizer={args.tokenizer}", "--overwrite"]
    rows, results = [], {}

    def run(name: str, cmd: list[str], outputs: str, note: str = "") -> None:
        r = measure(cmd)
        files = sorted(glob.glob(outputs))
        r["instances"], r["digest"] = content_digest(files) if name != "sharded x%d" % args.repeat else (
            sum(1 for f in files for _ in read_records(f)), "")
        results[name] = r
        print(f"{name}: {r['wall_s']:.2f} s, {r['peak_rss_mib']:.1f} MiB, {r['instances']} instances", flush=True)
        rows.append((name, r, note))

    if args.reference:
        out = os.path.join(work, "ref.tfrecord")
        run("original", [sys.executable, os.path.join(REPO, "bench", "run_original_cpd.py"), args.reference,
                         f"--input_file={corpus}", f"--output_file={out}", *common], out)
    out = os.path.join(work, "faithful.tfrecord")
    run("faithful", [*ours, f"--input_file={corpus}", f"--output_file={out}", *common], out)
    prefix = os.path.join(work, "sharded")
    run("sharded", [*ours, "--mode=sharded", f"--input_file={corpus}", f"--output_file={prefix}", *common],
        prefix + "-*.tfrecord")
    if args.repeat > 1:
        big = os.path.join(work, f"wiki_x{args.repeat}.txt")
        with open(big, "w", encoding="utf-8") as f:
            text = open(corpus, encoding="utf-8").read()
            for _ in range(args.repeat):
                f.write(text)
        prefix = os.path.join(work, "big")
        run("sharded x%d" % args.repeat, [*ours, "--mode=sharded", f"--input_file={big}",
                                          f"--output_file={prefix}", *common], prefix + "-*.tfrecord",
            f"input {args.repeat}x ({args.repeat * info['bytes'] / 2**20:.0f} MiB)")

    ref = results.get("original")
    lines = [f"Input: shared wiki as one sentence per line ({info['bytes'] / 2**20:.2f} MiB, {info['documents']:,} "
             f"documents, {info['sentences']:,} sentences; splitter in the bench), `--dupe_factor=5`, 128/20, "
             f"uncased, tokenizer `{args.tokenizer}`. Peak RSS = whole process tree.", "",
             "| run | wall s | peak RSS MiB | instances | vs original |", "|---|---:|---:|---:|---|"]
    for name, r, note in rows:
        scale = args.repeat if note else 1  # the 10x row: time per input byte vs the original's
        ratio = (f"{scale * ref['wall_s'] / r['wall_s']:.2f}x faster{' per input byte' if note else ''}, "
                 f"{r['peak_rss_mib'] / ref['peak_rss_mib']:.2f}x RSS" if ref and name != "original" else "")
        lines.append(f"| {name}{' — ' + note if note else ''} | {r['wall_s']:.2f} | {r['peak_rss_mib']:.0f} | "
                     f"{r['instances']:,} | {ratio} |")
    if ref:
        same = ref["digest"] == results["faithful"]["digest"]
        lines += ["", f"Faithful records identical to the original's (content sha256): **{same}**."]
        print("faithful identical to original:", same)
    if not args.no_report:
        write_section("create_pretraining_data", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
