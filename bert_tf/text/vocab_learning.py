"""Learn a WordPiece vocabulary from text, in the layout of the original BERT vocab.txt.

Words are counted after the original BasicTokenizer (`bert_tf.text.tokenization`: cleaning,
CJK splitting, optional lower-casing and accent stripping, punctuation splitting), so the
vocabulary fits exactly how FullTokenizer will split text. The word pieces are then learned
from those counts by one of two learners:

  * 'tensorflow_text' (default): tensorflow-text's WordPiece learner
    (`wordpiece_tokenizer_learner_lib`, Google's published top-down algorithm behind
    `bert_vocab_from_dataset`); no extra dependency, but pure Python and slow (~25 s for
    1 MB of wiki text at 8k tokens). Its own `bert_vocab_from_dataset` is not used because
    its tokenizer lower-cases with ICU NFKC_Casefold, unlike the original's lower() + NFD.
  * 'tokenizers': Hugging Face `tokenizers`' WordPieceTrainer (Rust; an optional
    dependency), ~25x faster and as good (tokens per word on held-back text), but not
    exactly reproducible: its ties are broken in hash-map order, so ~2 of 8,000 tokens
    can differ from run to run.

Layout written (as in the released uncased vocab): [PAD]=0, [unused0]..[unused98]=1..99,
[UNK]=100, [CLS]=101, [SEP]=102, [MASK]=103, [unused99].., then the single characters in
code-point order, then the learned words and `##` pieces by decreasing use (how often
FullTokenizer emits them on the training words), then the `##` single characters in
code-point order.
"""
from __future__ import annotations

import collections
import math
from typing import Iterable, Iterator, List, Sequence

from absl import logging

from bert_tf.text import tokenization
from bert_tf.text.tokenization import VocabError
from bert_tf.data.atomic_io import atomic_write

SPECIAL_TOKENS = ("[UNK]", "[CLS]", "[SEP]", "[MASK]")
UNUSED_BEFORE_SPECIAL = 99   # [unused0]..[unused98] put [UNK] at id 100
DEFAULT_NUM_UNUSED = 994     # the released uncased vocab: [unused0]..[unused993]
JOINER = "##"
LEARNERS = ("tensorflow_text", "tokenizers")
MIN_COUNT = 2  # at threshold 1 every substring is a token and learning crawls


def reserved_tokens(num_unused: int = DEFAULT_NUM_UNUSED) -> List[str]:
    """[PAD], [unused0..98], [UNK], [CLS], [SEP], [MASK], [unused99..num_unused-1]."""
    if num_unused < UNUSED_BEFORE_SPECIAL:
        raise VocabError(f"--num_unused must be at least {UNUSED_BEFORE_SPECIAL} "
                         f"(so that [UNK] has id 100), got {num_unused}")
    unused = [f"[unused{i}]" for i in range(num_unused)]
    return (["[PAD]"] + unused[:UNUSED_BEFORE_SPECIAL] + list(SPECIAL_TOKENS)
            + unused[UNUSED_BEFORE_SPECIAL:])


def count_words(lines: Iterable[str], do_lower_case: bool = True) -> collections.Counter:
    """Counts of the words the original BasicTokenizer makes of `lines`."""
    basic = tokenization.BasicTokenizer(do_lower_case=do_lower_case)
    counts: collections.Counter = collections.Counter()
    for line in lines:
        if line.strip():
            counts.update(basic.tokenize(line))
    return counts


def _is_joined_char(token: str) -> bool:
    return token.startswith(JOINER) and len(token) == len(JOINER) + 1


def arrange_vocab(reserved: Sequence[str], learned: Sequence[str], vocab_size: int) -> List[str]:
    """The final token list of exactly `vocab_size` tokens in the original's layout.

    `learned` is the learner's output, its pieces most useful first.
    An excess drops the rarest learned pieces (every character keeps its plain and `##`
    form, added where the learner lacks it, so no word of known characters becomes
    [UNK]); a shortfall (a corpus too small for the
    target) is filled with more [unusedN] tokens in the reserved block, with a warning saying how many
    tokens the corpus gave.
    """
    reserved_set = set(reserved)
    pieces = [t for t in learned if t not in reserved_set]
    chars = sorted(t for t in pieces if len(t) == 1)
    joined = {t for t in pieces if _is_joined_char(t)} | {JOINER + c for c in chars}
    joined_chars = sorted(joined, key=lambda t: t[-1])
    words = [t for t in pieces if len(t) > 1 and not _is_joined_char(t)]
    fixed = len(reserved) + len(chars) + len(joined_chars)
    if fixed > vocab_size:
        raise VocabError(f"--vocab_size={vocab_size} is too small for {len(reserved)} reserved "
                         f"tokens and {len(chars)} characters (with their ## forms); "
                         f"raise it or lower --num_unused / --max_unique_chars")
    words = words[:vocab_size - fixed]
    extra = vocab_size - fixed - len(words)
    if extra:
        learned_count = len(chars) + len(joined_chars) + len(words)
        logging.warning("--vocab_size=%d is more than the corpus can fill: it gives only %d tokens (characters, "
                        "their ## forms and learned pieces) besides the %d reserved; the other %d are "
                        "[unusedN] tokens", vocab_size, learned_count, len(reserved), extra)
    unused_count = sum(1 for t in reserved if t.startswith("[unused"))
    extra_unused = [f"[unused{unused_count + i}]" for i in range(extra)]
    return list(reserved) + extra_unused + chars + words + joined_chars


def _tf_text_learner():
    """tensorflow-text's learner module, imported only when used (it loads TensorFlow)."""
    import bert_tf._env  # noqa: F401
    from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib
    return wordpiece_tokenizer_learner_lib


def _search_threshold(word_counts: Sequence, params) -> List[str]:
    """The learner's vocabulary for the count threshold that best fills `params.vocab_size`.

    Accepts the first vocabulary between the target and `slack_ratio` above it (the caller
    drops its rarest pieces); else returns the smallest one above the target or, when even
    threshold MIN_COUNT falls short, the largest one. Vocabulary size falls roughly as a power of
    the threshold, so the threshold is bisected on a log scale: a handful of learning
    passes instead of the ~17 of the library's own linear bisection.
    """
    target, slack = params.vocab_size, params.slack_ratio * params.vocab_size
    lo = MIN_COUNT
    hi = max(lo, max(count for _, count in word_counts))  # at least one pass
    over: List[str] = []
    under: List[str] = []
    while lo <= hi:
        thresh = max(lo, min(hi, round(math.sqrt(lo * hi))))
        vocab = _tf_text_learner().learn_with_thresh(word_counts, thresh, params)
        if len(vocab) >= target:
            if not over or len(vocab) < len(over):
                over = vocab
            if len(vocab) - target <= slack:
                break
            lo = thresh + 1
        else:
            if len(vocab) > len(under):
                under = vocab
            hi = thresh - 1
    return over or under


def _learn_tensorflow_text(word_counts: Sequence, reserved: List[str], vocab_size: int,
                           max_unique_chars: int, max_input_words: int) -> List[str]:
    """tensorflow-text's top-down WordPiece learner (pure Python, slow)."""
    learner = _tf_text_learner()
    params = learner.Params(None, MIN_COUNT, 4, max_input_words, 50, max_unique_chars,
                            vocab_size, 0.05, True, JOINER, reserved)
    words = learner.get_input_words(word_counts, reserved, params.max_token_length)
    allowed_chars = learner.get_allowed_chars(words, max_unique_chars)
    words = learner.filter_input_words(words, allowed_chars, max_input_words)
    return _search_threshold(words, params)


def _repeated_words(word_counts: Sequence, chunk: int = 4096) -> Iterator[str]:
    """Each word as often as it was counted, in space-separated chunks."""
    for word, count in word_counts:
        while count > 0:
            yield " ".join([word] * min(count, chunk))
            count -= chunk


def _learn_tokenizers(word_counts: Sequence, reserved: List[str], vocab_size: int,
                      max_unique_chars: int, max_input_words: int) -> List[str]:
    """Hugging Face `tokenizers`' WordPieceTrainer (Rust: whole-Wikipedia scale)."""
    try:
        from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    except ImportError:
        raise VocabError("--learner=tokenizers needs the `tokenizers` package "
                         "(pip install tokenizers); or use --learner=tensorflow_text") from None
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    # The words are already BasicTokenizer's: only split them apart again.
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size, min_frequency=MIN_COUNT, special_tokens=reserved,
        limit_alphabet=max_unique_chars, continuing_subword_prefix=JOINER, show_progress=False)
    tokenizer.train_from_iterator(_repeated_words(word_counts[:max_input_words]), trainer)
    vocab = tokenizer.get_vocab()
    return sorted(vocab, key=vocab.get)


def _wordpiece_split(word: str, vocab: set) -> List[str]:
    """Greedy longest-match-first split of one word, as the original WordpieceTokenizer."""
    pieces, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start:
            piece = word[start:end] if start == 0 else JOINER + word[start:end]
            if piece in vocab:
                break
            end -= 1
        if end == start:
            return []  # the whole word would be [UNK]
        pieces.append(piece)
        start = end
    return pieces


def order_by_use(learned: Sequence[str], word_counts: Sequence) -> List[str]:
    """`learned` sorted by how often FullTokenizer would emit each token on the training
    words (then by token): the original's "by frequency" layout, the same for both learners,
    and the order in which `arrange_vocab` drops the least useful pieces."""
    vocab = set(learned)
    uses: collections.Counter = collections.Counter()
    for word, count in word_counts:
        for piece in _wordpiece_split(word, vocab):
            uses[piece] += count
    return sorted(learned, key=lambda t: (-uses[t], t))


def learn_vocab(word_counts: collections.Counter, vocab_size: int,
                num_unused: int = DEFAULT_NUM_UNUSED, max_unique_chars: int = 1000,
                learner_name: str = "tensorflow_text",
                max_input_words: int = 5_000_000) -> List[str]:
    """A WordPiece vocabulary of exactly `vocab_size` tokens learned from word counts.

    `learner_name`: 'tensorflow_text' (no extra dependency, Google's published algorithm,
    slow) or 'tokenizers' (Hugging Face, optional dependency, ~25x faster). The characters
    kept are the `max_unique_chars` most frequent ones; words with other characters become
    [UNK] when tokenized, as in the original. Only the `max_input_words` most frequent
    distinct words are learned from.
    """
    if learner_name not in LEARNERS:
        raise VocabError(f"unknown --learner={learner_name!r}; expected one of "
                         f"{', '.join(LEARNERS)}")
    if not word_counts:
        raise VocabError("no words to learn from: the input is empty")
    reserved = reserved_tokens(num_unused)
    # Sorted by count then word: the result does not depend on reading order.
    ordered = sorted(word_counts.items(), key=lambda wc: (-wc[1], wc[0]))
    learn = _learn_tensorflow_text if learner_name == "tensorflow_text" else _learn_tokenizers
    learned = learn(ordered, reserved, vocab_size, max_unique_chars, max_input_words)
    return arrange_vocab(reserved, order_by_use(learned, ordered), vocab_size)


def write_vocab(path: str, tokens: Sequence[str]) -> None:
    """Write one token per line, first to a temporary name, then renamed into place."""
    try:
        with atomic_write(path) as f:
            f.writelines(t + "\n" for t in tokens)
    except OSError as e:
        raise VocabError(f"{path}: cannot write the vocabulary: {e.strerror}") from None
