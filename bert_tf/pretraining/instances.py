"""Documents -> masked-LM / next-sentence training instances, as the original `create_pretraining_data.py`.

Faithful reproduction: for the same documents, flags and seed, `create_training_instances` consumes
Python's `random.Random` in exactly the original's order (document shuffle; per document the target
length, segment split, random-next choice with its 10 tries, put-back of unused segments, truncation;
per instance the candidate shuffle and 80/10/10 draws; the final instance shuffle) and so yields the
same instances. It works on token ids instead of strings, which changes no draw: the original's
tokens map one-to-one onto ids. bert_tf's additions leave those draws alone: masking_unit="span"
(SpanBERT's spans, bert_tf.pretraining.span_masking, drawn from the same generator) and masking="none"
(the same instances, written with their true tokens and no predictions).

Input (files -> documents of token ids) is bert_tf.pretraining.documents; its names are
importable from here too, for the data-prep programs and tests that use them beside the algorithm.
"""
from __future__ import annotations

import dataclasses
from fractions import Fraction
import os
import random
from typing import Callable, NamedTuple, Sequence

from bert_tf.pretraining import span_masking
from bert_tf.pretraining.documents import (DataPrepError, Document, expand_input_patterns,  # noqa: F401
                                           get_line_tokenizer, iter_text_documents, load_vocab_checked,
                                           tokenize_documents, tokenize_lines_parallel)

MASKING_UNITS = ("wordpiece", "word", "span")
MASKING_KINDS = ("static", "none")


@dataclasses.dataclass(frozen=True)
class InstanceOptions:
    """The original's flags that shape instances."""
    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    do_whole_word_mask: bool = False
    dupe_factor: int = 10
    # What becomes of a chosen position (the paper's Table 8): [MASK], a random word, else kept as it is.
    mask_token_prob: float = 0.8
    random_token_prob: float = 0.1
    # What is masked: single WordPieces (the original's default), whole words (as do_whole_word_mask), or
    # SpanBERT's spans of whole words (bert_tf.pretraining.span_masking).
    masking_unit: str = "wordpiece"
    # static: records carry their masks (the original); none: the same instances with their true tokens
    # and no predictions, for masks drawn at training time (run_pretraining --dynamic_masking).
    masking: str = "static"

    @property
    def unit(self) -> str:
        """The masking unit, with the original's do_whole_word_mask meaning "word"."""
        return "word" if self.do_whole_word_mask else self.masking_unit

    def replacement_thresholds(self) -> tuple[float, float, float]:
        """(mask, mask + keep, keep / (keep + random)): a draw below the first masks, below the second keeps
        (sharded mode's one draw); the faithful mode's second draw keeps below the third, as the original's
        `rand() < 0.5`. Computed on the decimal values given, so the defaults give exactly 0.8, 0.9, 0.5."""
        mask, random_word = Fraction(repr(self.mask_token_prob)), Fraction(repr(self.random_token_prob))
        keep = 1 - mask - random_word
        share = keep / (keep + random_word) if keep + random_word else Fraction(1)
        return float(mask), float(mask + keep), float(share)

    def validate(self) -> None:
        # [CLS] A [SEP] B [SEP] with A, B >= 1 token, and randint(2, max_seq_length - 3) needs >= 5.
        if self.max_seq_length < 5:
            raise DataPrepError(f"--max_seq_length={self.max_seq_length}: must be at least 5 "
                                "([CLS] A [SEP] B [SEP] and a target length of 2)")
        if self.max_predictions_per_seq < 1:
            raise DataPrepError(f"--max_predictions_per_seq={self.max_predictions_per_seq}: must be >= 1")
        if not 0.0 < self.masked_lm_prob <= 1.0 or not 0.0 <= self.short_seq_prob <= 1.0:
            raise DataPrepError("--masked_lm_prob must be within (0, 1] and --short_seq_prob within [0, 1]")
        if self.dupe_factor < 1:
            raise DataPrepError(f"--dupe_factor={self.dupe_factor}: must be >= 1")
        self._validate_masking()
        if not (0.0 <= self.mask_token_prob <= 1.0 and 0.0 <= self.random_token_prob <= 1.0
                and Fraction(repr(self.mask_token_prob)) + Fraction(repr(self.random_token_prob)) <= 1):
            raise DataPrepError(f"--mask_token_prob={self.mask_token_prob} and --random_token_prob="
                                f"{self.random_token_prob}: each within [0, 1], their sum at most 1 (the rest "
                                "of the chosen tokens are kept)")

    def _validate_masking(self) -> None:
        if self.masking_unit not in MASKING_UNITS:
            raise DataPrepError(f"--masking_unit={self.masking_unit!r}: one of {', '.join(MASKING_UNITS)}")
        if self.masking not in MASKING_KINDS:
            raise DataPrepError(f"--masking={self.masking!r}: one of {', '.join(MASKING_KINDS)}")
        if self.do_whole_word_mask and self.masking_unit == "span":
            raise DataPrepError("--do_whole_word_mask means --masking_unit=word; it cannot be combined with "
                                "--masking_unit=span (spans are made of whole words already)")

    def masking_warning(self) -> str | None:
        """A warning when max_predictions_per_seq caps masking below masked_lm_prob for full sequences."""
        wanted = int(round(self.max_seq_length * self.masked_lm_prob))
        if self.max_predictions_per_seq < wanted:
            return (f"--max_predictions_per_seq={self.max_predictions_per_seq} is below max_seq_length x "
                    f"masked_lm_prob = {wanted}: full-length sequences get only "
                    f"{self.max_predictions_per_seq / self.max_seq_length:.1%} of tokens masked")
        return None


class VocabIds:
    """What the instance algorithm needs from the vocab, as ints."""

    def __init__(self, vocab: "dict[str, int]"):
        try:
            self.cls_id, self.sep_id, self.mask_id = vocab["[CLS]"], vocab["[SEP]"], vocab["[MASK]"]
        except KeyError as e:
            raise DataPrepError(f"vocab has no {e.args[0]} token") from None
        # The original draws random words from list(vocab.keys()): keep that order.
        self.random_word_ids = [vocab[w] for w in vocab]
        self.size = max(vocab.values()) + 1
        self.is_subword = bytearray(self.size)
        for word, i in vocab.items():
            if word.startswith("##"):
                self.is_subword[i] = 1


class TrainingInstance(NamedTuple):
    """One sentence pair: `input_ids` = [CLS] A [SEP] B [SEP] with masking applied, unpadded."""
    input_ids: list
    num_a: int  # tokens of A, so segment ids are 0 for the first num_a + 2 positions
    masked_lm_positions: list
    masked_lm_ids: list
    is_random_next: bool

    @property
    def segment_ids(self) -> list:
        return [0] * (self.num_a + 2) + [1] * (len(self.input_ids) - self.num_a - 2)


# ---------------------------------------------------------------------------------------------
# The algorithm (the original's, on ids)


# Python's MT19937 hands out 32-bit words; getrandbits(k <= 32) is the top k bits of one word and
# random() is 53 bits from two. Generating the words in bulk (numpy's MT19937, same state) and
# consuming them in Python reproduces every draw at a fraction of the per-call cost.
_BLOCK_WORDS = 1 << 16
_SHIFTS = [32 - m.bit_length() for m in range(1 << 12)]  # for _randbelow(m): word >> shift


class StreamRandom:
    """`random.Random(seed)`'s `random()`, `randint()` and `shuffle()`, draw for draw, faster.

    Only those three methods, with ranges below 2**32 (all this program needs); the word stream is
    numpy's MT19937 set to `random.Random(seed)`'s state, so the results are bit-identical.
    """

    def __init__(self, seed: int, block_words: int = _BLOCK_WORDS):
        import numpy as np

        state = random.Random(seed).getstate()[1]
        self._bitgen = np.random.MT19937()
        self._bitgen.state = {"bit_generator": "MT19937",
                              "state": {"key": np.array(state[:624], dtype=np.uint32), "pos": state[624]}}
        self._block = block_words
        self._words: list = []
        self._pos = 0

    def _refill(self, pos: int) -> tuple[list, int]:
        """Drops words before `pos`, appends a fresh block; returns (words, 0)."""
        self._words = self._words[pos:] + self._bitgen.random_raw(self._block).tolist()
        self._pos = 0
        return self._words, 0

    def random(self) -> float:
        words, p = self._words, self._pos
        if p + 2 > len(words):
            words, p = self._refill(p)
        self._pos = p + 2
        return ((words[p] >> 5) * 67108864.0 + (words[p + 1] >> 6)) * (1.0 / 9007199254740992.0)

    def randint(self, a: int, b: int) -> int:
        """a + _randbelow(b - a + 1), as `random.Random.randint`."""
        n = b - a + 1
        if not 0 < n < 1 << 32:
            raise ValueError(f"randint({a}, {b}): empty range or not below 2**32 values")
        shift = 32 - n.bit_length()
        words, p = self._words, self._pos
        while True:
            if p >= len(words):
                words, p = self._refill(p)
            r = words[p] >> shift
            p += 1
            if r < n:
                self._pos = p
                return a + r

    def shuffle(self, x: list) -> None:
        """Fisher-Yates from the back, j = _randbelow(i + 1): `random.Random.shuffle`'s draws."""
        n = len(x)
        if n >= 1 << 32:
            raise ValueError("shuffle: list of 2**32 or more items")
        words, p = self._words, self._pos
        if len(words) - p < 2 * n + 64:
            words, p = self._refill(p)
        shifts = _SHIFTS if n < len(_SHIFTS) else [32 - m.bit_length() for m in range(n + 1)]
        for i in range(n - 1, 0, -1):
            m = i + 1
            sh = shifts[m]
            while True:  # draw until below m (rejection sampling, as _randbelow)
                try:
                    j = words[p] >> sh
                except IndexError:
                    words, p = self._refill(p)
                    j = words[p] >> sh
                p += 1
                if j < m:
                    break
            x[i], x[j] = x[j], x[i]
        self._pos = p


def create_training_instances(documents: list[Document], options: InstanceOptions, vocab: VocabIds,
                              rng: "random.Random | StreamRandom", transform: Callable | None = None,
                              avoid_same_document: bool = False) -> list:
    """All instances of all documents, in the original's order: shuffle docs, dupe loop, shuffle instances.

    `transform` (e.g. serialize to bytes) is applied to each instance as it is made, so only its
    result is held until the final shuffle, which depends on the instance count alone.
    """
    documents = list(documents)
    rng.shuffle(documents)
    instances: list = []
    for _ in range(options.dupe_factor):
        for document_index in range(len(documents)):
            made = create_instances_from_document(documents, document_index, options, vocab, rng,
                                                  avoid_same_document)
            instances.extend(map(transform, made) if transform else made)
    rng.shuffle(instances)
    return instances


def _random_document_index(num_documents: int, document_index: int, rng: "random.Random | StreamRandom",
                           avoid_same_document: bool) -> int | None:
    """The document B is drawn from; None when `avoid_same_document` and there is no other."""
    if avoid_same_document:
        if num_documents < 2:
            return None
        other = rng.randint(0, num_documents - 2)
        return other + 1 if other >= document_index else other
    # The original: up to 10 tries, then keeps whatever it drew (possibly this very document).
    for _ in range(10):
        random_document_index = rng.randint(0, num_documents - 1)
        if random_document_index != document_index:
            break
    return random_document_index


def create_instances_from_document(all_documents: list[Document], document_index: int,
                                   options: InstanceOptions, vocab: VocabIds, rng: "random.Random | StreamRandom",
                                   avoid_same_document: bool = False) -> list[TrainingInstance]:
    """Instances of one document; the original's segment packing and NSP sampling.

    With `avoid_same_document` (scalable mode) B is never drawn from the same document: with one
    document available, chunks become actual-next pairs, and a one-segment chunk yields no instance.
    """
    document = all_documents[document_index]
    max_num_tokens = options.max_seq_length - 3
    rand, randint = rng.random, rng.randint
    target_seq_length = max_num_tokens
    if rand() < options.short_seq_prob:
        target_seq_length = randint(2, max_num_tokens)

    instances = []
    current_chunk: list = []
    current_length = 0
    i = 0
    while i < len(document):
        segment = document[i]
        current_chunk.append(segment)
        current_length += len(segment)
        if i == len(document) - 1 or current_length >= target_seq_length:
            a_end = 1
            if len(current_chunk) >= 2:
                a_end = randint(1, len(current_chunk) - 1)
            tokens_a = [t for seg in current_chunk[:a_end] for t in seg]
            tokens_b: list = []
            random_index = None
            if len(current_chunk) == 1 or rand() < 0.5:
                random_index = _random_document_index(len(all_documents), document_index, rng,
                                                      avoid_same_document)
            if random_index is not None:
                target_b_length = target_seq_length - len(tokens_a)
                random_document = all_documents[random_index]
                for j in range(randint(0, len(random_document) - 1), len(random_document)):
                    tokens_b.extend(random_document[j])
                    if len(tokens_b) >= target_b_length:
                        break
                i -= len(current_chunk) - a_end  # put the unused segments back
            else:
                for seg in current_chunk[a_end:]:
                    tokens_b.extend(seg)
            if tokens_b:  # empty only when avoid_same_document dropped a one-segment chunk
                tokens_a, tokens_b = truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
                ids = [vocab.cls_id, *tokens_a, vocab.sep_id, *tokens_b, vocab.sep_id]
                instances.append(create_masked_lm_predictions(
                    ids, len(tokens_a), random_index is not None, options, vocab, rng))
            current_chunk = []
            current_length = 0
        i += 1
    return instances


def truncate_seq_pair(tokens_a: list, tokens_b: list, max_num_tokens: int,
                      rng: "random.Random | StreamRandom") -> tuple[list, list]:
    """Trims the longer side, front or back by a coin flip each, until the pair fits (the original's draws)."""
    a0, a1, b0, b1 = 0, len(tokens_a), 0, len(tokens_b)
    rand = rng.random
    while (a1 - a0) + (b1 - b0) > max_num_tokens:
        if a1 - a0 > b1 - b0:
            if rand() < 0.5:
                a0 += 1
            else:
                a1 -= 1
        elif rand() < 0.5:
            b0 += 1
        else:
            b1 -= 1
    if not (a1 > a0 and b1 > b0):
        raise AssertionError("truncation emptied a segment")
    return tokens_a[a0:a1], tokens_b[b0:b1]


def _candidate_groups(ids: list, num_a: int, whole_word: bool, is_subword: bytearray) -> list:
    """Maskable positions (all but [CLS] and the two [SEP]), grouped by word for whole-word masking.

    As in the original, a "##" piece right after the middle [SEP] joins the last word of A.
    """
    positions = [*range(1, num_a + 1), *range(num_a + 2, len(ids) - 1)]
    if not whole_word:
        return positions
    groups: list = []
    for i in positions:
        if groups and is_subword[ids[i]]:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def create_masked_lm_predictions(ids: list, num_a: int, is_random_next: bool, options: InstanceOptions,
                                 vocab: VocabIds, rng: "random.Random | StreamRandom") -> TrainingInstance:
    """Masks ~masked_lm_prob of the tokens: 80% [MASK], 10% kept, 10% a random vocab word (the rates of
    --mask_token_prob and --random_token_prob; the defaults draw exactly as the original). The unit is a
    WordPiece or a whole word as in the original, or a SpanBERT span (bert_tf.pretraining.span_masking)."""
    rand = rng.random
    unit = options.unit
    groups = _candidate_groups(ids, num_a, unit != "wordpiece", vocab.is_subword)
    num_to_predict = min(options.max_predictions_per_seq,
                         max(1, int(round(len(ids) * options.masked_lm_prob))))
    if unit == "span":
        spans = span_masking.choose_spans(groups, num_a, num_to_predict, options.max_predictions_per_seq, rng)
        output = span_masking.replace_spans(ids, spans, vocab.mask_id, vocab.random_word_ids,
                                            options.replacement_thresholds(), rng)
        chosen = sorted(p for span in spans for p in span)
        return TrainingInstance(output, num_a, chosen, [ids[p] for p in chosen], is_random_next)
    rng.shuffle(groups)  # (the original shuffles before counting: no draw in between)
    if unit == "word":
        chosen: list = []
        for group in groups:
            if len(chosen) >= num_to_predict:
                break
            if len(chosen) + len(group) <= num_to_predict:  # else skip a word that would overflow
                chosen.extend(group)
    else:
        chosen = groups[:num_to_predict]

    output = list(ids)
    words, num_words = vocab.random_word_ids, len(vocab.random_word_ids)
    mask, _, keep = options.replacement_thresholds()
    for index in chosen:
        if rand() < mask:
            output[index] = vocab.mask_id
        elif rand() >= keep:  # else: keep the original token
            output[index] = words[rng.randint(0, num_words - 1)]
    chosen.sort()
    return TrainingInstance(output, num_a, chosen, [ids[p] for p in chosen], is_random_next)


def unmasked(instance: TrainingInstance) -> TrainingInstance:
    """The instance with its true tokens and no predictions (--masking=none): masks are drawn at training."""
    ids = list(instance.input_ids)
    for position, original in zip(instance.masked_lm_positions, instance.masked_lm_ids):
        ids[position] = original
    return TrainingInstance(ids, instance.num_a, [], [], instance.is_random_next)


@dataclasses.dataclass
class InstanceStats:
    """Counts for the summary and for comparing modes (NSP balance, masked fraction, lengths)."""
    instances: int = 0
    tokens: int = 0
    segment_b_tokens: int = 0
    masked_positions: int = 0
    random_next: int = 0
    shorter_than_max: int = 0

    def add(self, instance: TrainingInstance, max_seq_length: int) -> None:
        n = len(instance.input_ids)
        self.instances += 1
        self.tokens += n
        self.segment_b_tokens += n - instance.num_a - 2
        self.masked_positions += len(instance.masked_lm_positions)
        self.random_next += instance.is_random_next
        self.shorter_than_max += n < max_seq_length

    def merge(self, other: "InstanceStats") -> None:
        for field in dataclasses.fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))

    def summary(self) -> dict:
        n = max(self.instances, 1)
        return {**dataclasses.asdict(self), "is_next": self.instances - self.random_next,
                "random_next_fraction": self.random_next / n, "mean_tokens": self.tokens / n,
                "masked_fraction": self.masked_positions / max(self.tokens, 1),
                "short_fraction": self.shorter_than_max / n}


# ---------------------------------------------------------------------------------------------
# Shared by both modes' drivers


def record_encoder(options: InstanceOptions, vocab: VocabIds, stats: InstanceStats) -> Callable:
    """instance -> serialized record, counting it into `stats` on the way."""
    from bert_tf.pretraining.records import ExampleEncoder

    encoder = ExampleEncoder(options.max_seq_length, options.max_predictions_per_seq, vocab.size)

    def encode(instance: TrainingInstance) -> bytes:
        if options.masking == "none":
            instance = unmasked(instance)
        stats.add(instance, options.max_seq_length)
        return encoder.encode(instance.input_ids, instance.segment_ids, instance.masked_lm_positions,
                              instance.masked_lm_ids, int(instance.is_random_next))
    return encode


def check_output_writable(path: str) -> None:
    """Fails early, before any work, when `path` cannot be created."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise DataPrepError(f"output folder does not exist: {folder} (for {path})")
    if not os.access(folder, os.W_OK):
        raise DataPrepError(f"output folder is not writable: {folder} (for {path})")


def summary_path(output_file: str) -> str:
    """`x.tfrecord[.gz]` -> `x.summary.json` (beside the outputs)."""
    stem = output_file[:-3] if output_file.endswith(".gz") else output_file
    stem = stem[:-len(".tfrecord")] if stem.endswith(".tfrecord") else stem
    return stem + ".summary.json"


def run_faithful(input_files: Sequence[str], output_files: Sequence[str], vocab_file: str,
                 do_lower_case: bool, options: InstanceOptions, random_seed: int, *,
                 tokenizer: str = "exact", num_workers: int = 1, compress: bool = False,
                 log: Callable[[str], None] = print) -> dict:
    """The original program: all documents, one RNG, one global shuffle, round-robin over outputs.

    Returns the summary (the caller writes it), each file with its size and sha256 so that a rerun
    can tell it is still complete. Memory is O(corpus): the global shuffle needs every record; they
    are held as serialized bytes. Temporary files a killed run left for these outputs are removed
    first (and named in the log).
    """
    import time
    from bert_tf.data.atomic_io import remove_leftover_temp_files
    from bert_tf.data.files import file_sha256
    from bert_tf.data.tfrecord import TFRecordWriter

    start = time.time()
    options.validate()
    for path in output_files:
        check_output_writable(path)
    remove_leftover_temp_files([*output_files, summary_path(output_files[0])], log=log)
    line_tokenizer = get_line_tokenizer(tokenizer, vocab_file, do_lower_case)
    vocab = VocabIds(line_tokenizer.vocab)
    text_documents = list(iter_text_documents(input_files))
    lines = [line for doc in text_documents for line in doc]
    ids = tokenize_lines_parallel(lines, tokenizer, vocab_file, do_lower_case, num_workers)
    documents = tokenize_documents(text_documents, lambda _lines: ids)  # ids of exactly those lines
    del text_documents, lines, ids
    if not documents:
        raise DataPrepError(f"no documents: the input has no line with tokens ({', '.join(input_files)})")
    if len(documents) == 1:
        log("WARNING: the input holds a single document: as in the original, 'random next' segments "
            "are drawn from that same document (use --mode=sharded to avoid this)")
    elapsed = time.time() - start
    log(f"{len(documents)} documents ({len(documents) / elapsed:.0f}/s), {sum(map(len, documents))} "
        f"sentences read and tokenized in {elapsed:.1f} s")
    phase = time.time()
    stats = InstanceStats()
    records = create_training_instances(documents, options, vocab, StreamRandom(random_seed),
                                        transform=record_encoder(options, vocab, stats))
    del documents
    elapsed = time.time() - phase
    log(f"{len(records)} instances created in {elapsed:.1f} s ({len(records) / max(elapsed, 1e-9):.0f}/s)")
    files = []
    for k, path in enumerate(output_files):
        with TFRecordWriter(path, compress) as writer:
            for record in records[k::len(output_files)]:
                writer.write(record)
        files.append({"file": path, "instances": writer.count, "bytes": os.path.getsize(path),
                      "sha256": file_sha256(path)})
    summary = {"mode": "faithful", **stats.summary(), "files": files,
               "wall_seconds": round(time.time() - start, 2)}
    return summary
