"""Learn a WordPiece vocab.txt (original BERT layout) from text files. See docs/data_prep.md.

  create_vocab --input='/tmp/corpus/corpus-*.txt' --output=/tmp/vocab.txt --vocab_size=30522 \
    --do_lower_case=True --learner=tokenizers

(`data_prep/create_vocab.py` in a clone, `bert-tf-create-vocab` installed, or
`python -m bert_tf.text.create_vocab`; `--learner=tokenizers` needs the `vocab` extra.)
"""
from __future__ import annotations

import dataclasses
import time
from typing import Iterator

from bert_tf import cli
from bert_tf.data import output_lock
from bert_tf.data.atomic_io import remove_leftover_temp_files
from bert_tf.options import Options, option
from bert_tf.data.files import expand_inputs, read_lines
from bert_tf.text import vocab_learning
from bert_tf.text.text_presence import TextPresence, has_text


@dataclasses.dataclass(frozen=True, kw_only=True)
class CreateVocabOptions(Options):
    """Corpus, vocab size and learner."""

    input: str | None = option(None, "Comma-separated globs of text files (e.g. the output of prepare_corpus: "
                               "one sentence per line); blank lines are ignored.", required=True, path=True)
    output: str | None = option(None, "Path of the vocab.txt to write.", required=True, path=True)
    vocab_size: int = option(30522, "Exact number of tokens in the vocabulary.", positive=True)
    do_lower_case: bool = option(True, "Lower-case and strip accents (uncased model), as "
                                 "FullTokenizer(do_lower_case=...) will.")
    num_unused: int = option(vocab_learning.DEFAULT_NUM_UNUSED,
                             "Number of [unusedN] tokens (>= 99; 994 in the released uncased vocab).")
    learner: str = option("tensorflow_text", "tensorflow_text: no extra dependency, slow (minutes per few MB); "
                          "tokenizers: Hugging Face `tokenizers` (pip install 'bert_tf[vocab]'), ~25x faster.",
                          enum=tuple(vocab_learning.LEARNERS))
    max_unique_chars: int = option(1000, "Keep only this many most frequent characters.")
    max_input_words: int = option(5_000_000, "Learn from only this many most frequent distinct words.")
    sample_every: int = option(1, "Read only every N-th line (a quick, deterministic subsample of a large "
                               "corpus).", positive=True)


def _lines(files: list[str], every: int) -> Iterator[str]:
    """Every `every`-th non-blank line of `files`; an input without text is an error naming the file."""
    index = 0
    presence = TextPresence()
    for path in files:
        held_text = False
        for line in read_lines(path):
            if line.strip():
                held_text = held_text or has_text(line)
                if index % every == 0:
                    yield line
                index += 1
        presence.file_done(path, held_text)
    presence.finish(vocab_learning.VocabError, prefix="--input: ")


def run(options: CreateVocabOptions) -> None:
    """Count words, learn, write; prints a one-line summary.

    --output is locked for the run (a second run writing it is refused, naming this one), so the
    temporary files of that name found beside it are a killed run's: they are removed and named."""
    options.validate()
    output_lock.check_output_file(options.output, "--output")
    with output_lock.lock_output(options.output, "--output"):
        remove_leftover_temp_files([options.output], log=print)
        _create(options)


def _create(options: CreateVocabOptions) -> None:
    """`run` once --output is this run's."""
    start = time.time()
    files = expand_inputs(options.input.split(","))
    counts = vocab_learning.count_words(_lines(files, options.sample_every), options.do_lower_case)
    counted = time.time()
    tokens = vocab_learning.learn_vocab(counts, options.vocab_size, options.num_unused, options.max_unique_chars,
                                        options.learner, options.max_input_words)
    vocab_learning.write_vocab(options.output, tokens)
    print(f"{len(files)} files, {sum(counts.values())} words ({len(counts)} distinct) -> "
          f"{len(tokens)} tokens in {options.output} (counting {counted - start:.1f} s, "
          f"learning {time.time() - counted:.1f} s)")


def main(argv: list[str] | None = None) -> None:
    """`bert-tf-create-vocab` / data_prep/create_vocab.py."""
    cli.run_program(run, CreateVocabOptions, doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()
