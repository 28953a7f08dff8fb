"""create_pretraining_data on the shared wiki: ours (faithful and sharded modes) against the original's program.

The input (bench/wiki_sentences.py): the shared wiki as one sentence per line, a blank line between documents (7.07
MiB, 2,847 documents, 63,860 sentences), uncased vocab, seq 128, 20 predictions, dupe factor 5, the exact
tokenizer. Each run is one process of the program, timed by bench/data_prep_contender.py with the peak RSS of its
process tree (sampled every 50 ms), one after another: faithful mode (the original's algorithm and records), sharded
mode (documents hashed to shards, bounded memory), and sharded mode on the input repeated 10 times (its memory
should stay flat). The original (google-research/bert's create_pretraining_data.py, unchanged under TensorFlow 2's
compat.v1 by bench/original_cpd.py) runs only with `--original_bert=CHECKOUT` (or $BERT_TF_ORIGINAL_BERT): no copy
of it ships here; with it, faithful mode's records are also compared with the original's (content sha256). Speed
has no paper scale (the paper scale runs the machine scale's plan).
"""
from __future__ import annotations

from studies import original, readers, speed_readers
from studies.study import Claim, Column, Run, Study, Table, Versus

VOCAB, REPEAT, SMOKE_DOCUMENTS = "{shared}/vocab/uncased/vocab.txt", 10, 8
NAMES = {"original": "original google-research/bert", "faithful": "ours, faithful mode",
         "sharded": "ours, sharded mode", f"sharded_x{REPEAT}": f"ours, sharded mode, input ×{REPEAT}"}
COST = {"original": 50, "faithful": 10, "sharded": 5, f"sharded_x{REPEAT}": 25}


def runs(scale: str, seeds) -> list[Run]:
    """The input first, then the original (with a checkout), faithful mode (compared with it) and sharded mode."""
    smoke, checkout = scale == "smoke", original.checkout()
    found = [Run("corpus", "bench.wiki_sentences",
                 ("--wiki={shared}/corpus/wiki", "--out={out}",
                  f"--documents={SMOKE_DOCUMENTS}" if smoke else f"--repeat={REPEAT}"),
                 readers.nothing, ("wiki.txt",), cost_s=1 if smoke else 5, report=False)]
    names = ["original"] * bool(checkout) + ["faithful", "sharded"] + [f"sharded_x{REPEAT}"] * (not smoke)
    for name in names:
        extra = {"original": (f"--original={checkout}",),
                 "faithful": ("--same_as={run:original}",) if checkout else ()}.get(name, ())
        corpus = f"{{run:corpus}}/wiki_x{REPEAT}.txt" if name.endswith(f"x{REPEAT}") else "{run:corpus}/wiki.txt"
        found.append(Run(name, "bench.data_prep_contender",
                         (f"--contender={name.split('_')[0]}", f"--input={corpus}", f"--vocab={VOCAB}",
                          "--dupe_factor=5", *extra, "--out={out}"),
                         speed_readers.figures(speed_readers.DATA_PREP), ("result.json",), {"contender": name},
                         5 if smoke else COST[name]))
    return found


STUDY = Study(
    name="speed_data_prep", title="create_pretraining_data: ours (faithful, sharded) against the original",
    paper="No paper figure; the data-prep issue's comparison with the original program",
    about=__doc__.split("\n\n", 1)[1].strip(),
    runs=runs,
    table=Table(rows=("contender",),
                columns=(Column("wall_s", "wall s", digits=2), Column("peak_rss_mib", "peak RSS MiB", digits=0),
                         Column("instances", "instances", digits=0),
                         Column("identical_to_original", "records identical to the original's (%)", percent=True,
                                digits=0)),
                claims=(Claim("faithful mode runs faster than the original (docs/data_prep.md; README: faster than "
                              "the original)", "wall_s", ("faithful",), ("original",), lower_is_better=True),),
                row_names={(k,): v for k, v in NAMES.items()},
                versus=(Versus("faithful mode, wall time (original over ours)", "wall_s", ("faithful",),
                               (("original",),), lower_is_better=True),
                        Versus("sharded mode, wall time", "wall_s", ("sharded",), (("original",),),
                               lower_is_better=True),
                        Versus("faithful mode, peak RSS", "peak_rss_mib", ("faithful",), (("original",),),
                               lower_is_better=True))),
    seeds={"smoke": 1, "machine": 1, "paper": 1},
    kind="speed")
