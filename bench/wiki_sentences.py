"""The data-prep speed study's input: the shared wiki as create_pretraining_data reads it, one sentence per line and
a blank line between documents (python -m bench.wiki_sentences --wiki=DIR --out=DIR [--documents=N] [--repeat=K]).

Every `<doc>` of the WikiExtractor files in sorted file order; the `<doc>`/`</doc>` lines and the title line after
`<doc ...>` are dropped; every other non-empty line is a paragraph, split into sentences after `.`, `!` or `?`
(optionally followed by closing quotes/brackets) when whitespace and then an ASCII capital, digit or opening quote
follow, except after a single capital letter or a few abbreviations (Mr, Dr, St, ...). Documents without sentences
are skipped. Writes OUT/wiki.txt and, with --repeat=K, OUT/wiki_xK.txt (the same text K times: the flat-memory run).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re

ABBREVIATIONS = {"Mr", "Mrs", "Ms", "Dr", "St", "Jr", "Sr", "Prof", "Gen", "Col", "No", "Vol", "vs", "etc",
                 "Inc", "Ltd", "Co", "Mt", "Fig", "ca", "c", "e.g", "i.e"}
BOUNDARY = re.compile(r"""([.!?]+["')\]]*)\s+(?=["'(\[]?[A-Z0-9])""")


def split_sentences(paragraph: str) -> list[str]:
    """The paragraph's sentences by the simple, deterministic rule of the module docstring."""
    text = " ".join(paragraph.split())
    sentences, start = [], 0
    for m in BOUNDARY.finditer(text):
        before = text[start:m.start(1)].rsplit(" ", 1)[-1]
        if m.group(1) == "." and (before in ABBREVIATIONS or (len(before) == 1 and before.isupper())):
            continue
        sentences.append(text[start:m.end(1)])
        start = m.end()
    if text[start:].strip():
        sentences.append(text[start:])
    return sentences


def documents(wiki: str):
    """Each document's sentences, from the WikiExtractor files under `wiki` (*/wiki_*), in sorted order."""
    for name in sorted(glob.glob(os.path.join(wiki, "*", "wiki_*"))):
        doc, expect_title = [], False
        with open(name, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if line.startswith("<doc "):
                    doc, expect_title = [], True
                elif line.startswith("</doc>"):
                    if doc:
                        yield doc
                elif line and expect_title:
                    expect_title = False
                elif line:
                    doc.extend(split_sentences(line))


def write(wiki: str, out: str, limit: int | None = None, repeat: int = 1) -> dict:
    """OUT/wiki.txt (the first `limit` documents) and, with `repeat` > 1, OUT/wiki_xREPEAT.txt; their counts."""
    os.makedirs(out, exist_ok=True)
    docs = [doc for _, doc in zip(range(limit) if limit else iter(int, 1), documents(wiki))]
    text = "".join("\n".join(doc) + "\n\n" for doc in docs)
    with open(os.path.join(out, "wiki.txt"), "w", encoding="utf-8") as f:
        f.write(text)
    if repeat > 1:
        with open(os.path.join(out, f"wiki_x{repeat}.txt"), "w", encoding="utf-8") as f:
            f.write(text * repeat)
    return {"bytes": len(text.encode("utf-8")), "documents": len(docs), "sentences": sum(map(len, docs))}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--wiki", required=True, help="the shared wiki folder (AA/wiki_00, ...)")
    p.add_argument("--out", required=True)
    p.add_argument("--documents", type=int, default=None, help="the first documents only")
    p.add_argument("--repeat", type=int, default=1, help="also write the text this many times over")
    args = p.parse_args(argv)
    counts = write(args.wiki, args.out, args.documents, args.repeat)
    with open(os.path.join(args.out, "counts.json"), "w", encoding="utf-8") as f:
        json.dump(counts, f)
    print(counts)


if __name__ == "__main__":
    main()
