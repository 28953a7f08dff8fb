"""The pre-training side of the ablation study (bench/bench_ablations.py): the variants, the corpus split, the
records of every masking row, one BERT-Mini pre-training run per variant and its held-out perplexity.

Every variant reads the same documents, the same number of steps, batch, learning rate and seed; they differ only
in what the issue's rows change: the objective (Table 5), the masked positions' replacement rates (Table 8), and
static against dynamic masking (RoBERTa). The corpus is the shared wiki plus the shared books except the one the
multiple-choice proxy set is built from (books/1399-0.txt); every 20th document is held out for the perplexity.
"""
from __future__ import annotations

import dataclasses
import glob
import json
import math
import os
import sys

from bench._classifier_runs import GLUE, ROOT, SHARED, run_logged, log_tail

SHARED_VOCAB = os.path.join(SHARED, "data", "vocab", "uncased", "vocab.txt")
MINI_CONFIG = os.path.join(ROOT, "configs", "bert_mini_config.json")
HELD_OUT_BOOK = "1399-0.txt"  # the multiple-choice proxy set's book: kept out of pre-training
SHARDS = 20  # prepare_corpus puts document i in shard i mod SHARDS; the last shard is held out


DEFAULT_RULE = (0.8, 0.1)  # (mask, random) rates of the original's 80/10/10 rule
ALL_MASK_RULE = (1.0, 0.0)


def rule_name(mask_token_prob: float, random_token_prob: float) -> str:
    return f"mask{round(mask_token_prob * 100)}-rnd{round(random_token_prob * 100)}"


@dataclasses.dataclass(frozen=True)
class Variant:
    """One pre-training setting of the study, and what the paper reports for it (dev figures, BERT-Base)."""

    name: str
    row: str  # as the table names it
    objective: str = "mlm_nsp"
    mask_token_prob: float = 0.8
    random_token_prob: float = 0.1
    dynamic: bool = False
    pretrained: bool = True
    paper: tuple[tuple[str, float], ...] = ()  # (column, figure) of the paper's Table 5 or 8

    @property
    def records(self) -> str:
        """The name of the record set it trains on (variants with equal rates share one)."""
        if self.dynamic:
            return "unmasked"
        return rule_name(self.mask_token_prob, self.random_token_prob)

    @property
    def same_token_prob(self) -> float:
        return round(1.0 - self.mask_token_prob - self.random_token_prob, 6)

    @property
    def held_out_rules(self) -> dict[str, tuple[float, float]]:
        """The held-out record sets it is scored on, as (mask, random) rates by result suffix: "" the 80/10/10
        records (Table 6's LM ppl); "_all_mask" every target shown as [MASK], what context alone predicts and so
        comparable across MLM rows (on 80/10/10 records a tenth of the targets is the input token itself, which a
        model learns to copy long before it learns from context); "_own_rule" a static rule that is neither, the
        inputs its training saw (0/0/100 never saw [MASK])."""
        if not self.pretrained:
            return {}
        if self.objective == "ltr":
            return {"": DEFAULT_RULE}
        rules = {"": DEFAULT_RULE, "_all_mask": ALL_MASK_RULE}
        own = (self.mask_token_prob, self.random_token_prob)
        if not self.dynamic and own not in rules.values():
            rules["_own_rule"] = own
        return rules


# The paper's dev figures: Table 5 (MNLI-m, QNLI, MRPC acc, SST-2 acc, SQuAD v1.1 F1) and Table 8 (MNLI, NER
# fine-tuned F1, NER feature-based F1 with the last four layers concatenated); BERT-Base, 1M steps of 256 x 512.
VARIANTS = {v.name: v for v in (
    Variant("mlm_nsp", "MLM + NSP, 80/10/10 (BERT)",
            paper=(("MNLI-m", 84.4), ("QNLI", 88.4), ("MRPC", 86.7), ("SST-2", 92.7), ("SQuAD F1", 88.5),
                   ("T8 MNLI", 84.2), ("T8 NER FT", 95.4), ("T8 NER FB", 94.9))),
    Variant("mlm", "No NSP", objective="mlm",
            paper=(("MNLI-m", 83.9), ("QNLI", 84.9), ("MRPC", 86.5), ("SST-2", 92.6), ("SQuAD F1", 87.9))),
    Variant("ltr", "LTR & No NSP", objective="ltr",
            paper=(("MNLI-m", 82.1), ("QNLI", 84.3), ("MRPC", 77.5), ("SST-2", 92.1), ("SQuAD F1", 77.8))),
    Variant("mask100", "masking 100/0/0", mask_token_prob=1.0, random_token_prob=0.0,
            paper=(("T8 MNLI", 84.3), ("T8 NER FT", 94.9), ("T8 NER FB", 94.0))),
    Variant("mask80_rnd20", "masking 80/0/20", mask_token_prob=0.8, random_token_prob=0.2,
            paper=(("T8 MNLI", 84.1), ("T8 NER FT", 95.2), ("T8 NER FB", 94.6))),
    Variant("mask80_same20", "masking 80/20/0", mask_token_prob=0.8, random_token_prob=0.0,
            paper=(("T8 MNLI", 84.4), ("T8 NER FT", 95.2), ("T8 NER FB", 94.7))),
    Variant("same20_rnd80", "masking 0/20/80", mask_token_prob=0.0, random_token_prob=0.8,
            paper=(("T8 MNLI", 83.7), ("T8 NER FT", 94.8), ("T8 NER FB", 94.6))),
    Variant("rnd100", "masking 0/0/100", mask_token_prob=0.0, random_token_prob=1.0,
            paper=(("T8 MNLI", 83.6), ("T8 NER FT", 94.9), ("T8 NER FB", 94.6))),
    Variant("dynamic", "MLM + NSP, dynamic masking", dynamic=True),
    Variant("random_init", "no pre-training (random init)", pretrained=False),
)}


@dataclasses.dataclass(frozen=True)
class Scale:
    """What every pre-training run shares (the study's size knobs)."""

    steps: int
    batch: int
    learning_rate: float
    max_seq_length: int = 128
    max_predictions: int = 20
    vocab_size: int = 0  # 0: the shared bert-base-uncased vocab; else one learned from the study's corpus
    dupe_factor: int = 1  # of the training records (held-out records: 1, each instance scored once)
    steps_per_loop: int = 25
    seed: int = 12345
    mixed_precision: str = "float32"  # of the training runs (held-out evaluation: float32)
    corpus: str = "wiki_books"  # one of CORPORA
    init_checkpoint: str = ""  # "": from scratch; else continued pre-training from this export (domain-adaptive)


@dataclasses.dataclass(frozen=True)
class ModelFiles:
    """The vocab and BERT config every run of the study shares."""

    vocab: str
    config: str


def python() -> list[str]:
    return [sys.executable]


def model_files(work_dir: str, scale: Scale) -> ModelFiles:
    """The shared uncased vocab and configs/bert_mini_config.json; or, with scale.vocab_size, a WordPiece vocab of
    that size learned from the training shards (create_vocab.py) and the BERT-Mini config with its vocab_size."""
    if not scale.vocab_size:
        return ModelFiles(SHARED_VOCAB, MINI_CONFIG)
    vocab = os.path.join(work_dir, f"vocab-{scale.vocab_size}.txt")
    config = os.path.join(work_dir, f"bert_mini_vocab{scale.vocab_size}_config.json")
    if not os.path.exists(vocab):
        _run([*python(), os.path.join(ROOT, "data_prep", "create_vocab.py"),
              f"--input={corpus(work_dir, scale)[0]}", f"--output={vocab}", f"--vocab_size={scale.vocab_size}"],
             os.path.join(work_dir, "logs", "vocab.log"))
    if not os.path.exists(config):
        with open(MINI_CONFIG, encoding="utf-8") as f:
            values = json.load(f)
        with open(config + ".tmp", "w", encoding="utf-8") as f:
            json.dump({**values, "vocab_size": scale.vocab_size}, f, indent=2, sort_keys=True)
        os.replace(config + ".tmp", config)
    return ModelFiles(vocab, config)


# ---------------------------------------------------------------------------------------------- data

CORPORA = {
    "wiki_books": "the shared wiki and books",
    "sst2_train": "the text of SST-2's train.tsv, labels dropped (in-domain text for the SST-2 runs)",
}
SST2_LINES_PER_DOCUMENT = 10  # train.tsv's phrases come in no order: documents of consecutive lines, for packing


def shard_name(shard: int) -> str:
    """prepare_corpus's name for shard `shard` of SHARDS (the last one is the held-out shard)."""
    return f"corpus-{shard:05d}-of-{SHARDS:05d}.txt"


def training_shards(paths: list[str]) -> list[str]:
    """`paths` (corpus shards) without the held-out one, sorted: what pre-training reads."""
    return sorted(p for p in paths if os.path.basename(p) != shard_name(SHARDS - 1))


def corpus(work_dir: str, scale: Scale) -> tuple[str, str]:
    """(training shards, comma-joined; held-out shard) of `scale.corpus`, one sentence per line, a blank line
    between documents, document i in shard i mod 20, so that every 20th document is held out: the shared wiki and
    books but HELD_OUT_BOOK (`prepare_corpus --num_shards`), or SST-2's training text (sst2_corpus)."""
    folder = os.path.join(work_dir, "corpus")
    held_out = os.path.join(folder, shard_name(SHARDS - 1))
    if not os.path.exists(held_out) and scale.corpus == "sst2_train":
        sst2_corpus(folder)
    elif not os.path.exists(held_out):
        books = sorted(p for p in glob.glob(os.path.join(SHARED, "data", "corpus", "books", "*.txt"))
                       if os.path.basename(p) != HELD_OUT_BOOK)
        inputs = [os.path.join(SHARED, "data", "corpus", "wiki", "*", "wiki_*"), *books]
        _run([*python(), os.path.join(ROOT, "data_prep", "prepare_corpus.py"), f"--input={','.join(inputs)}",
              f"--output_dir={folder}", f"--num_shards={SHARDS}", "--min_chars_per_doc=300"],
             os.path.join(work_dir, "logs", "corpus.log"))
    return ",".join(training_shards(glob.glob(os.path.join(folder, "corpus-*.txt")))), held_out


def sst2_corpus(folder: str) -> None:
    """SST-2's training sentences without their labels (the dev set is never read), as documents of
    SST2_LINES_PER_DOCUMENT lines in file order, written as prepare_corpus's shards."""
    from bert_tf.data.atomic_io import atomic_write

    with open(os.path.join(GLUE, "SST-2", "train.tsv"), encoding="utf-8") as f:
        lines = [line.split("\t")[0].strip() for line in list(f)[1:]]
    documents = [lines[i:i + SST2_LINES_PER_DOCUMENT] for i in range(0, len(lines), SST2_LINES_PER_DOCUMENT)]
    os.makedirs(folder, exist_ok=True)
    for shard in range(SHARDS):  # the held-out shard, the one corpus() checks for, last
        with atomic_write(os.path.join(folder, shard_name(shard)), encoding="utf-8") as f:
            f.write("".join("\n".join(document) + "\n\n" for document in documents[shard::SHARDS]))


def records(work_dir: str, scale: Scale, name: str, mask_token_prob: float = 0.8, random_token_prob: float = 0.1,
            held_out: bool = False) -> str:
    """One record set of the corpus (create_pretraining_data, the original's faithful mode): static masks at the
    given rates, or none (name "unmasked": positions drawn in training). Written once, then reused. Held-out sets
    are "heldout" (80/10/10) or "heldout-RULE" (another rule), whatever `name`."""
    file_name = held_out_name(mask_token_prob, random_token_prob) if held_out else name
    path = os.path.join(work_dir, "records", f"{file_name}.tfrecord")
    if os.path.exists(path):
        return path
    training, held_out_file = corpus(work_dir, scale)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    command = [*python(), os.path.join(ROOT, "data_prep", "create_pretraining_data.py"),
               f"--input_file={held_out_file if held_out else training}", f"--output_file={path}",
               f"--vocab_file={model_files(work_dir, scale).vocab}", "--do_lower_case",
               f"--max_seq_length={scale.max_seq_length}", f"--max_predictions_per_seq={scale.max_predictions}",
               f"--dupe_factor={1 if held_out else scale.dupe_factor}", f"--random_seed={scale.seed}",
               f"--mask_token_prob={mask_token_prob}", f"--random_token_prob={random_token_prob}"]
    if name == "unmasked":
        command.append("--masking=none")
    _run(command, os.path.join(work_dir, "logs", f"records-{os.path.basename(path)}.log"))
    return path


def held_out_name(mask_token_prob: float, random_token_prob: float) -> str:
    rule = (mask_token_prob, random_token_prob)
    return "heldout" if rule == DEFAULT_RULE else f"heldout-{rule_name(*rule)}"


def _run(command: list[str], log: str, env: dict | None = None) -> float:
    """Runs `command` logged to `log`; raises with the log's tail when it fails. Returns its wall seconds."""
    os.makedirs(os.path.dirname(log), exist_ok=True)
    code, wall, _ = run_logged(command, log, env=env)
    if code:
        raise RuntimeError(f"exit {code}: {' '.join(command[:3])} ...: {log_tail(log)}")
    return wall


# ---------------------------------------------------------------------------------------------- pre-training

def run_dir(work_dir: str, variant: Variant) -> str:
    return os.path.join(work_dir, "pretrain", variant.name)


def checkpoint(work_dir: str, variant: Variant) -> str | None:
    """The original-format export a fine-tuning run starts from (None: random init)."""
    return os.path.join(run_dir(work_dir, variant), "export") if variant.pretrained else None


def pretrain(work_dir: str, variant: Variant, scale: Scale, env: dict) -> dict:
    """run_pretraining.py for the variant, then its held-out evaluation; both resumable (a finished run is reused,
    an interrupted one resumes from its last checkpoint, as the program does)."""
    data = records(work_dir, scale, variant.records, variant.mask_token_prob, variant.random_token_prob)
    output_dir = run_dir(work_dir, variant)
    files = model_files(work_dir, scale)
    common = [f"--bert_config_file={files.config}", f"--vocab_file={files.vocab}",
              f"--max_seq_length={scale.max_seq_length}", f"--max_predictions_per_seq={scale.max_predictions}",
              f"--objective={variant.objective}", f"--seed={scale.seed}", "--eval_batch_size=32"]
    wall = 0.0
    if not os.path.exists(os.path.join(output_dir, "export", "bert_model.ckpt.index")):
        dynamic = ["--dynamic_masking", f"--mask_token_prob={variant.mask_token_prob}",
                   f"--random_token_prob={variant.random_token_prob}"] if variant.dynamic else []
        wall = _run([*python(), os.path.join(ROOT, "run_pretraining.py"), *common, f"--input_file={data}",
                     f"--output_dir={output_dir}", "--do_train", f"--train_batch_size={scale.batch}",
                     f"--num_train_steps={scale.steps}", f"--num_warmup_steps={max(1, scale.steps // 10)}",
                     f"--learning_rate={scale.learning_rate}", f"--steps_per_loop={scale.steps_per_loop}",
                     f"--save_checkpoints_steps={min(scale.steps, 250)}", f"--mixed_precision={scale.mixed_precision}",
                     *dynamic, *([f"--init_checkpoint={scale.init_checkpoint}"] if scale.init_checkpoint else [])],
                    output_dir + ".log", env)
    result = {}
    for suffix, rule in variant.held_out_rules.items():
        held_out = records(work_dir, scale, "heldout", *rule, held_out=True)
        eval_dir = f"{output_dir}-{held_out_name(*rule)}"
        result[f"held_out{suffix}"] = held_out_eval(work_dir, variant, common, held_out, eval_dir, env)
        result[f"perplexity{suffix}"] = perplexity(result[f"held_out{suffix}"], variant.objective)
    return {**result, "curve": training_curve(output_dir, variant.objective), "pretrain_wall_s": wall or None}


def held_out_eval(work_dir: str, variant: Variant, common: list[str], records_file: str, eval_dir: str,
                  env: dict) -> dict[str, float]:
    """run_pretraining.py --do_eval of the variant's export over every instance of `records_file` (once)."""
    if not os.path.exists(os.path.join(eval_dir, "eval_results.txt")):
        _run([*python(), os.path.join(ROOT, "run_pretraining.py"), *common, f"--input_file={records_file}",
              f"--output_dir={eval_dir}", "--do_eval", f"--init_checkpoint={checkpoint(work_dir, variant)}",
              f"--max_eval_steps={held_out_batches(records_file)}"], eval_dir + ".log", env)
    return read_results(os.path.join(eval_dir, "eval_results.txt"))


def perplexity(figures: dict[str, float], objective: str) -> float | None:
    """exp of the held-out LM loss (next-token loss for LTR)."""
    loss = figures.get("next_token_loss" if objective == "ltr" else "masked_lm_loss")
    return math.exp(loss) if loss is not None else None


def held_out_batches(records_file: str, batch: int = 32) -> int:
    """Whole eval batches in a record set (the program's eval reads --max_eval_steps batches of a repeated set, as
    the original's; this many cover every held-out instance at most once), from its summary.json."""
    with open(records_file.replace(".tfrecord", ".summary.json"), encoding="utf-8") as f:
        instances = sum(entry["instances"] for entry in json.load(f)["files"])
    return max(1, instances // batch)


def unigram_loss(work_dir: str, scale: Scale, rule: tuple[float, float] = DEFAULT_RULE) -> float:
    """The held-out masked-LM loss (records masked by `rule`) of the best model that ignores context: each
    masked token's training-set frequency (add-one smoothed over the vocab). A pre-trained model near it has
    learnt token counts only (the early plateau of MLM training)."""
    import collections

    from bert_tf.data.tfrecord import read_examples

    def masked_ids(path: str):
        for example in read_examples(path):
            yield from (i for i, w in zip(example["masked_lm_ids"], example["masked_lm_weights"]) if w > 0)

    counts = collections.Counter(masked_ids(records(work_dir, scale, "mask80-rnd10")))
    with open(model_files(work_dir, scale).vocab, encoding="utf-8") as f:
        size = sum(1 for _ in f)
    total = sum(counts.values()) + size
    held_out = list(masked_ids(records(work_dir, scale, "heldout", *rule, held_out=True)))
    return -sum(math.log((counts[i] + 1) / total) for i in held_out) / len(held_out)


def read_results(path: str) -> dict[str, float]:
    """`key = value` lines of an eval_results.txt."""
    with open(path, encoding="utf-8") as f:
        return {k.strip(): float(v) for k, v in (line.split("=", 1) for line in f if "=" in line)}


def training_curve(output_dir: str, objective: str) -> list[dict[str, float]]:
    """The run's training LM loss per logged loop, from its TensorBoard summaries (whole across resumes)."""
    from bench._summaries import scalar_series

    key = "next_token_loss" if objective == "ltr" else "masked_lm_loss"
    return [{"step": float(step), key: value} for step, value in scalar_series(os.path.join(output_dir, "train"), key)]


def scale_dict(scale: Scale) -> dict:
    return json.loads(json.dumps(dataclasses.asdict(scale)))


def saved_scale_dict(saved: dict) -> dict:
    """A work dir's saved scale with the defaults of fields added since it was written (its runs used them)."""
    defaults = {f.name: f.default for f in dataclasses.fields(Scale) if f.default is not dataclasses.MISSING}
    return {**defaults, **saved}
