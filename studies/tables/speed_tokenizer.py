"""Tokenizer throughput on the shared wiki (uncased): our fast and exact paths against Hugging Face `tokenizers`,
tensorflow-text's FastBertTokenizer and, where a checkout is given, the original's FullTokenizer.

Every contender (bench/tokenizer_contender.py) runs in a fresh process of its own, one after another, and turns the
same lines (the shared wiki's `wiki_0*` files split on LF, 8.2 MB, 68,965 lines) into ids with the uncased vocab;
MB/s is UTF-8 megabytes (10^6 bytes) of input per wall second, the median of 3 runs in the process, each on a fresh
tokenizer (vocab loading and tracing excluded); MB per CPU-second counts all of the process' threads. "Identical
ids" is the share of lines whose ids equal our exact path's (itself equal to the original's goldens). The original
(google-research/bert's tokenization.py, its tf.gfile served by tf.compat.v1) is timed only with
`--original_bert=CHECKOUT` (or $BERT_TF_ORIGINAL_BERT): no copy of it ships here. Speed has no paper scale: the
paper scale runs the machine scale's plan.
"""
from __future__ import annotations

from studies import original, speed_readers
from studies.study import Claim, Column, Run, Study, Table, Versus

CORPUS, VOCAB = "{shared}/corpus/wiki/*/wiki_0*", "{shared}/vocab/uncased/vocab.txt"
REPEATS, SMOKE_LINES = 3, 500  # bench_tokenizer.py's default repeats; the smoke plan's first lines
NAMES = {"exact": "ours, exact path (`FullTokenizer`)", "original": "original google-research/bert `FullTokenizer`",
         "fast": "ours, fast path, `tokenize_batch` → lists",
         "fast_arrays": "ours, fast path, `tokenize_batch_arrays` → flat ids + row splits",
         "fast_tf_text": "ours, fast path on its tensorflow-text engine, arrays",
         "hf": "Hugging Face `tokenizers` (Rust)", "tf_text": "tensorflow-text `FastBertTokenizer` → lists",
         "tf_text_arrays": "tensorflow-text `FastBertTokenizer` → arrays, one part per core"}
SMOKE = ("exact", "fast_arrays", "hf")


def runs(scale: str, seeds) -> list[Run]:
    """Our exact path first (every other contender's identity is against its ids), then the others."""
    smoke, checkout = scale == "smoke", original.checkout()
    names = [n for n in NAMES if (n != "original" or checkout) and (not smoke or n in SMOKE)]
    size = (f"--max_lines={SMOKE_LINES}", "--repeats=1") if smoke else (f"--repeats={REPEATS}",)
    found = []
    for name in names:
        extra = ((f"--original={checkout}",) if name == "original" else ()) + \
            (("--same_as={run:exact}",) if name != "exact" else ())
        found.append(Run(name, "bench.tokenizer_contender",
                         (f"--contender={name}", f"--corpus={CORPUS}", f"--vocab={VOCAB}", *size, *extra,
                          "--out={out}"),
                         speed_readers.figures(speed_readers.TOKENIZER), ("result.json", "line_hashes.npy"),
                         {"contender": name}, 5 if smoke else (60 if name in ("exact", "original") else 25)))
    return found


STUDY = Study(
    name="speed_tokenizer", title="Tokenizer throughput: our fast and exact paths against the peers",
    paper="No paper figure (the paper times no tokenizer); the tokenizer issue's speed comparison",
    about=__doc__.split("\n\n", 1)[1].strip(),
    runs=runs,
    table=Table(rows=("contender",),
                columns=(Column("mb_per_s", "MB/s", digits=2), Column("mb_per_cpu_s", "MB per CPU-second", digits=2),
                         Column("identical_lines", "identical ids (%)", percent=True, digits=2)),
                claims=(Claim("our exact path outruns the original's tokenizer (README: faster than the original)",
                              "mb_per_s", ("exact",), ("original",)),),
                row_names={(k,): v for k, v in NAMES.items()},
                versus=(Versus("fast path (arrays)", "mb_per_s", ("fast_arrays",),
                               (("hf",), ("tf_text_arrays",), ("original",))),
                        Versus("exact path", "mb_per_s", ("exact",), (("original",),)))),
    seeds={"smoke": 1, "machine": 1, "paper": 1},
    kind="speed")
