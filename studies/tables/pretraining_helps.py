"""Does our own pre-training help? BERT-Mini pre-trained by our programs against random init on SST-2 (issue #13).

The recipe search of issue #13, one row per pre-training recipe (the old result folder's name) and init: a BERT-Mini
(L=4, H=256) pre-trained by our `run_pretraining` (`mlm_nsp`, or `mlm` for a continuation on SST-2 text), fine-tuned
by our `run_classifier` on SST-2 (seq 64, batch 32, warm-up 10%) and scored on the whole dev set, against the same
program and config from random init (`random_init`). Folder names: `d10` the ablation study's model (30,522-token
vocab, 3,000 steps × 32 × seq 128); `v8k`/`v7k` an 8,000-token vocab learned from the corpus, 7,000 (`v7k`) or
12,000 (`v8k_12k`) steps × 64 × seq 64; `sst2_dapt[8k|16k]` then continued 4,000 (8,000, 16,000) steps on
SST-2's training text with its labels dropped; `reset_X` part X drawn again before fine-tuning; `sst2all` all
67,349 training sentences (else the first 5,000, or 1,000 with `sst1k`); `lrL_epE` the fine-tuning recipe (else
lr 1e-4, 2 epochs, or `ftNep`/`epN` epochs). Each record's labels hold its folder's whole recipe. Held-out
perplexity: exp of the masked-LM loss on the recipe's held-out documents (every 20th) masked 80/10/10, and with
every target shown as [MASK]; context-free: each token's training frequency alone. The old write-up called a
row a clear win only when every pre-trained seed beat every random-init seed by 2 points; wiki + books alone never
did. The runs declared here are the recipe it settled on: the `v7k` model continued 16,000 steps (two legs of 8,000
at lr 2e-4) on SST-2's text, pooler drawn again, fine-tuned on all of SST-2 at lr 5e-5 for 3 epochs, against random
init at its best recipe (lr 1e-4, 1 epoch), three seeds each, plus the held-out perplexity of both pre-trained
models. The paper's figure is BERT-Base's SST-2 dev accuracy (Table 5): a scale reference, not a target.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Mapping

from studies import mini_bert, readers
from studies.study import Claim, Column, Run, Study, Table, strategy_flags

WIKI = "mini_v8k_seq64_7k"  # the wiki + books model every winning row starts from
WINNER = "v7k_sst2_dapt16k_reset_pooler_sst2all_lr5e-5_ep3"  # the old write-up's clear win
RANDOM_BEST = "v7k_reset_pooler_sst2all"  # random init's best recipe with that vocab and data: lr 1e-4, 1 epoch
CORPUS = "pretraining/corpus"  # the pretraining study's shards of the shared wiki + books (shard 19 held out)
SEQ, PREDICTIONS = 64, 10


@dataclasses.dataclass(frozen=True)
class Sizes:
    """The recipe's sizes at one scale."""

    vocab_size: int
    learner: str                 # create_vocab --learner
    steps: int                   # wiki + books pre-training
    continued_steps: int         # each of the two legs on SST-2 text
    batch: int
    dupe_factor: int
    steps_per_loop: int
    mixed_precision: str
    held_out_batches: int        # of 32 held-out instances
    rows: tuple[int, int] | None  # (train, dev) SST-2 rows; None: the whole task
    finetune_batch: int
    epochs: tuple[float, float]  # (pre-trained at lr 5e-5, random init at lr 1e-4)
    minutes: Mapping[str, float]  # estimated wall minutes per kind of run
    accelerators: tuple[str, ...] = ()  # what our training and evaluation runs add (the paper scale's strategy)


MACHINE = Sizes(8000, "tensorflow_text", 7000, 8000, 64, 10, 25, "mixed_bfloat16", 16, None, 32, (3.0, 1.0),
                {"vocab": 10, "records": 5, "pretrain": 106, "continue": 54, "eval": 1, "winner": 21, "random": 7.2})
SIZES = {"smoke": Sizes(1500, "tokenizers", 4, 2, 8, 1, 2, "float32", 2, (64, 32), 8, (1.0, 1.0),
                        {"vocab": 0.1, "records": 0.1, "pretrain": 0.3, "continue": 0.3, "eval": 0.2, "winner": 0.3,
                         "random": 0.3}),
         "machine": MACHINE,
         # no counterpart in the paper: a pod would run this machine's recipe
         "paper": dataclasses.replace(MACHINE, accelerators=strategy_flags("paper"))}


def held_out_figures(out: str, folders: Mapping[str, str]) -> dict[str, float]:
    """A held-out evaluation's perplexity (exp of the masked-LM loss) and masked-LM accuracy."""
    found = readers.eval_results()(out, folders)
    return {"perplexity": math.exp(found["masked_lm_loss"]), "masked_lm_accuracy": found["masked_lm_accuracy"]}


def records_run(name: str, source: str, sizes: Sizes, held_out: bool) -> Run:
    """create_pretraining_data (the original's faithful mode, 80/10/10) with the learned vocab."""
    return Run(name, "bert_tf.pretraining.create_pretraining_data",
               (f"--input_file={source}", "--output_file={out}/records.tfrecord", "--vocab_file={run:vocab}/vocab.txt",
                "--do_lower_case", f"--max_seq_length={SEQ}", f"--max_predictions_per_seq={PREDICTIONS}",
                f"--dupe_factor={1 if held_out else sizes.dupe_factor}", "--random_seed=12345",
                "--mask_token_prob=0.8", "--random_token_prob=0.1"),
               readers.nothing, ("records.tfrecord",), cost_s=sizes.minutes["records"] * (12 if held_out else 60),
               report=False)


def model_flags(objective: str) -> tuple[str, ...]:
    return ("--bert_config_file={run:config}/bert_config.json", "--vocab_file={run:vocab}/vocab.txt",
            f"--max_seq_length={SEQ}", f"--max_predictions_per_seq={PREDICTIONS}", f"--objective={objective}",
            "--seed=12345", "--eval_batch_size=32")


def pretrain_run(key: str, objective: str, records: str, steps: int, learning_rate: str, init: str | None,
                 sizes: Sizes, minutes: float) -> Run:
    """run_pretraining from scratch (init None) or continued from an export (its schedule run again)."""
    return Run(key, "bert_tf.pretraining.program",
               (*model_flags(objective), f"--input_file={{run:{records}}}/records.tfrecord", "--output_dir={out}",
                "--do_train", f"--train_batch_size={sizes.batch}", f"--num_train_steps={steps}",
                f"--num_warmup_steps={max(1, steps // 10)}", f"--learning_rate={learning_rate}",
                f"--steps_per_loop={sizes.steps_per_loop}", f"--save_checkpoints_steps={min(steps, 250)}",
                *([] if sizes.accelerators else [f"--mixed_precision={sizes.mixed_precision}"]),  # else the flagfile's
                *([f"--init_checkpoint={init}"] if init else ()), *sizes.accelerators),
               readers.nothing, ("export/bert_model.ckpt.index",), cost_s=minutes * 60, report=False)


def eval_run(recipe: str, objective: str, records: str, export: str, sizes: Sizes) -> Run:
    """The held-out perplexity of `export`, recorded in the row of `recipe` (key as the old folder's file)."""
    return Run(f"{recipe}-pretrain-{objective}", "bert_tf.pretraining.program",
               (*model_flags(objective), f"--input_file={{run:{records}}}/records.tfrecord", "--do_eval",
                f"--init_checkpoint={export}", f"--max_eval_steps={sizes.held_out_batches}", "--output_dir={out}",
                *sizes.accelerators),
               held_out_figures, ("eval_results.txt",), {"recipe": recipe, "init": objective},
               sizes.minutes["eval"] * 60)


def finetune_run(recipe: str, init: str, seed: int, learning_rate: str, epochs: float, export: str | None,
                 data: str, sizes: Sizes, minutes: float) -> Run:
    """run_classifier on SST-2 from `export` (None: random init of the recipe's config)."""
    flags = ("--task_name=SST-2", f"--data_dir={data}", "--do_train", "--do_eval", f"--max_seq_length={SEQ}",
             f"--train_batch_size={sizes.finetune_batch}", f"--learning_rate={learning_rate}",
             f"--num_train_epochs={epochs}", "--warmup_proportion=0.1", f"--seed={seed}", "--output_dir={out}",
             "--vocab_file={run:vocab}/vocab.txt", "--bert_config_file={run:config}/bert_config.json",
             *([f"--init_checkpoint={export}"] if export else ()), *sizes.accelerators)
    return Run(f"{recipe}-sst2-{init}-s{seed}", "bert_tf.tasks.classifier", flags, mini_bert.task_scores("SST-2"),
               ("eval_results.txt",), {"recipe": recipe, "init": init, "seed": seed}, minutes * 60)


def runs(scale: str, seeds) -> list[Run]:
    sizes = SIZES[scale]
    shards = mini_bert.TRAINING_SHARDS.replace("{run:corpus}", f"{{run:{CORPUS}}}")
    held_out = mini_bert.HELD_OUT_SHARD.replace("{run:corpus}", f"{{run:{CORPUS}}}")
    text = "{run:sst2-text}/corpus-"
    found = [
        Run("vocab", "bert_tf.text.create_vocab",
            (f"--input={shards}", "--output={out}/vocab.txt", f"--vocab_size={sizes.vocab_size}",
             f"--learner={sizes.learner}"), readers.nothing, ("vocab.txt",), cost_s=sizes.minutes["vocab"] * 60,
            report=False),
        Run("config", "studies.tools", ("bert_config", f"--base={mini_bert.CONFIG}",
                                        f"--vocab_size={sizes.vocab_size}", "--out={out}"),
            readers.nothing, ("bert_config.json",), cost_s=1, report=False),
        records_run("records-wiki", shards, sizes, False), records_run("heldout-wiki", held_out, sizes, True),
        pretrain_run("pretrain-wiki", "mlm_nsp", "records-wiki", sizes.steps, "5e-4", None, sizes,
                     sizes.minutes["pretrain"]),
        eval_run(WIKI, "mlm_nsp", "heldout-wiki", "{run:pretrain-wiki}/export", sizes),
        Run("sst2-text", "studies.tools", ("sst2_text", "--src={shared}/glue/SST-2", "--out={out}"),
            readers.nothing, ("corpus-*.txt",), cost_s=2, report=False),
        records_run("records-sst2", f"{text}0000[0-9]-of-00020.txt,{text}0001[0-8]-of-00020.txt", sizes, False),
        records_run("heldout-sst2", f"{text}00019-of-00020.txt", sizes, True),
        pretrain_run("continue-8k", "mlm", "records-sst2", sizes.continued_steps, "2e-4",
                     "{run:pretrain-wiki}/export", sizes, sizes.minutes["continue"]),
        pretrain_run("continue-16k", "mlm", "records-sst2", sizes.continued_steps, "2e-4",
                     "{run:continue-8k}/export", sizes, sizes.minutes["continue"]),
        Run("reset-pooler", "studies.tools", ("reset_pooler", "--src={run:continue-16k}/export", "--seed=1",
                                              "--out={out}"),
            readers.nothing, ("bert_model.ckpt.index",), cost_s=10, report=False),
        eval_run(WINNER, "mlm", "heldout-sst2", "{run:reset-pooler}", sizes)]
    data = "{shared}/glue/SST-2"
    if sizes.rows:
        found.append(Run("data-SST-2", "studies.tools",
                         ("glue_subset", "--src={shared}/glue/SST-2", f"--train_rows={sizes.rows[0]}",
                          f"--dev_rows={sizes.rows[1]}", "--out={out}"),
                         readers.nothing, ("train.tsv", "dev.tsv"), cost_s=2, report=False))
        data = "{run:data-SST-2}"
    for seed in seeds:
        found += [finetune_run(WINNER, "mlm", seed, "5e-5", sizes.epochs[0], "{run:reset-pooler}", data, sizes,
                               sizes.minutes["winner"]),
                  finetune_run(RANDOM_BEST, "random_init", seed, "1e-4", sizes.epochs[1], None, data, sizes,
                               sizes.minutes["random"])]
    return found


STUDY = Study(
    name="pretraining_helps", title="Our own pre-training against random init on SST-2 (issue #13)",
    paper="Devlin et al. 2019, §5 and Table 5 (pre-training matters; BERT-Base SST-2 dev)",
    about=__doc__.split("\n\n", 1)[1].strip(),
    runs=runs,
    table=Table(rows=("recipe", "init"),
                columns=(Column("sst2_accuracy", "SST-2 dev acc"),
                         Column("perplexity", "held-out ppl, 80/10/10"),
                         Column("perplexity_all_mask", "held-out ppl, [MASK] only"),
                         Column("context_free_perplexity", "context-free ppl"),
                         Column("masked_lm_accuracy", "held-out MLM acc", True)),
                paper={(WINNER, "mlm"): {"sst2_accuracy": 92.7}},
                claims=(Claim("pre-training beats random initialisation on SST-2, each at its best recipe (our "
                              "wiki + books BERT-Mini continued 16,000 steps on SST-2's text, pooler drawn again)",
                              "sst2_accuracy", (WINNER, "mlm"), (RANDOM_BEST, "random_init")),
                        Claim("pre-training on wiki + books alone beats random initialisation on SST-2 (5,000 "
                              "sentences, lr 1e-4, 2 epochs)", "sst2_accuracy", (WIKI, "mlm_nsp"),
                              (WIKI, "random_init")))),
    seeds={"smoke": 1, "machine": 3, "paper": 5}, claims_by="Issue #13")
