"""Runs shared by the studies that pre-train BERT-Mini variants and sizes and fine-tune them (pretraining, table5,
table6, table8, swag): the variants, the pre-training recipe at each scale, and the fine-tuning runs of one variant on
one task.

Every variant reads the same documents (the shared wiki and books but the book the multiple-choice proxy set is made
from; every 20th document held out), the same steps, batch, learning rate and seed; they differ only in what the
paper's rows change: the objective (Table 5), the masked positions' replacement rates (Table 8), static against
dynamic masking; or the model's size (Table 6). At the paper scale every variant is a BERT-Base (the sizes are
the paper's), pre-trained with the shipped flagfiles (configs/) on the accelerators that `--strategy` names.
Pre-training runs belong to the `pretraining` study; the tables fine-tune from {run:pretraining/pretrain-VARIANT}.
"""
from __future__ import annotations

import dataclasses

from studies.study import SCALES, Run, strategy_flags

PRETRAINING = "pretraining"  # the study whose runs pre-train every variant
DEFAULT_MODEL = {"smoke": "bert_mini", "machine": "bert_mini", "paper": "bert_base"}  # configs/NAME_config.json
CONFIG = "{repo}/configs/bert_mini_config.json"  # BERT-Mini, the model of this machine's variants
VOCAB = "{shared}/vocab/uncased/vocab.txt"
HELD_OUT_BOOK = "1399-0.txt"  # the multiple-choice proxy set's book: kept out of pre-training
TRAINING_SHARDS = "{run:corpus}/corpus-0000[0-9]-of-00020.txt,{run:corpus}/corpus-0001[0-8]-of-00020.txt"
HELD_OUT_SHARD = "{run:corpus}/corpus-00019-of-00020.txt"


@dataclasses.dataclass(frozen=True)
class Variant:
    """One pre-training setting and the rows that name it."""

    name: str
    row: str
    objective: str = "mlm_nsp"
    mask_token_prob: float = 0.8
    random_token_prob: float = 0.1
    dynamic: bool = False
    pretrained: bool = True
    config: str | None = None     # a size of Table 6: configs/CONFIG_config.json (None: the scale's DEFAULT_MODEL)
    scales: tuple[str, ...] = SCALES  # where it is pre-trained (a size of Table 6 at its scales only)

    @property
    def records(self) -> str:
        """The training record set it reads (variants with equal rates share one)."""
        return "unmasked" if self.dynamic else rule(self.mask_token_prob, self.random_token_prob)


def rule(mask_token_prob: float, random_token_prob: float) -> str:
    return f"mask{round(mask_token_prob * 100)}-rnd{round(random_token_prob * 100)}"


VARIANTS = {v.name: v for v in (
    Variant("mlm_nsp", "MLM + NSP, 80/10/10 (BERT)"),
    Variant("mlm", "No NSP", objective="mlm"),
    Variant("ltr", "LTR & No NSP", objective="ltr"),
    Variant("mask100", "masking 100/0/0", mask_token_prob=1.0, random_token_prob=0.0),
    Variant("mask80_rnd20", "masking 80/0/20", mask_token_prob=0.8, random_token_prob=0.2),
    Variant("mask80_same20", "masking 80/20/0", mask_token_prob=0.8, random_token_prob=0.0),
    Variant("same20_rnd80", "masking 0/20/80", mask_token_prob=0.0, random_token_prob=0.8),
    Variant("rnd100", "masking 0/0/100", mask_token_prob=0.0, random_token_prob=1.0),
    Variant("dynamic", "MLM + NSP, dynamic masking", dynamic=True),
    Variant("random_init", "no pre-training (random init)", pretrained=False),
    # Table 6's sizes beside BERT-Mini (mlm_nsp): Google's miniature BERTs here, the paper's own at the paper scale.
    Variant("L2_H128_A2", "L=2, H=128, A=2 (BERT-Tiny)", config="bert_tiny", scales=("smoke", "machine")),
    Variant("L2_H256_A4", "L=2, H=256, A=4", config="bert_L2_H256_A4", scales=("machine",)),
    Variant("L6_H256_A4", "L=6, H=256, A=4", config="bert_L6_H256_A4", scales=("machine",)),
    Variant("L3_H768_A12", "L=3, H=768, A=12", config="bert_L3_H768_A12", scales=("paper",)),
    Variant("L6_H768_A3", "L=6, H=768, A=3", config="bert_L6_H768_A3", scales=("paper",)),
    Variant("L6_H768_A12", "L=6, H=768, A=12", config="bert_L6_H768_A12", scales=("paper",)),
    Variant("L12_H1024_A16", "L=12, H=1024, A=16", config="bert_L12_H1024_A16", scales=("paper",)),
    Variant("L24_H1024_A16", "L=24, H=1024, A=16 (BERT-Large)", config="bert_large", scales=("paper",)),
)}
SMOKE_VARIANTS = ("mlm_nsp", "mask100", "L2_H128_A2")


def config_name(variant: Variant, scale: str) -> str:
    """The variant's model at `scale`, a configs/ name: its Table 6 size, else the scale's default model."""
    return variant.config or DEFAULT_MODEL[scale]


def config_file(variant: Variant, scale: str) -> str:
    return f"{{repo}}/configs/{config_name(variant, scale)}_config.json"


@dataclasses.dataclass(frozen=True)
class Recipe:
    """Pre-training and fine-tuning sizes at one scale."""

    steps: int
    batch: int
    learning_rate: str
    dupe_factor: int
    steps_per_loop: int
    mixed_precision: str
    held_out_batches: int
    finetune_epochs: float
    glue_rows: dict               # task -> training rows (None: all)
    squad_questions: int          # of each half of the SQuAD v1.1 article split
    conll_documents: tuple        # (train, dev) documents
    lstm_units: int
    corpus: str


RECIPES = {
    "smoke": Recipe(4, 8, "2e-4", 1, 2, "float32", 2, 1.0, {"MRPC": 64, "SST-2": 64}, 40, (3, 2), 8,
                    "{shared}/corpus/wiki/AA/wiki_00"),
    "machine": Recipe(3000, 32, "2e-4", 10, 25, "mixed_bfloat16", 100, 2.0, {"MRPC": 2000, "SST-2": 5000}, 600,
                      (300, 25), 64, "{shared}/corpus/wiki/*/wiki_*,{shared}/corpus/books/[0-9]*.txt"),
    # The paper's 1M steps of 256 sequences (128 tokens for the first 90% of them) on a BERT-Base (not here).
    "paper": Recipe(1_000_000, 256, "1e-4", 10, 1000, "mixed_bfloat16", 1000, 3.0, {"MRPC": None, "SST-2": None},
                    10**6, (946, 216), 768, "{shared}/corpus/wiki/*/wiki_*,{shared}/corpus/books/[0-9]*.txt"),
}


def model_flags(variant: Variant, scale: str) -> tuple[str, ...]:
    """The vocab, config and pre-trained weights (none: random init) of every fine-tuning run; an LTR model keeps
    its causal mask, as the paper's did."""
    found = (f"--vocab_file={VOCAB}", f"--bert_config_file={config_file(variant, scale)}")
    if variant.pretrained:
        found += (f"--init_checkpoint={{run:{PRETRAINING}/pretrain-{variant.name}}}/export",)
    return found + (("--causal_attention",) if variant.objective == "ltr" else ())


def data_runs(scale: str, tasks: tuple[str, ...]) -> list[Run]:
    """The fine-tuning data each task reads, cut to the scale: GLUE train rows, the SQuAD v1.1 article split's
    first whole paragraphs, CoNLL-2003's first documents."""
    from studies import readers

    recipe, found = RECIPES[scale], []
    for task in ("MRPC", "SST-2"):
        if task in tasks:
            rows = recipe.glue_rows[task]
            found.append(Run(f"data-{task}", "studies.tools",
                             ("glue_subset", f"--src={{shared}}/glue/{task}", "--out={out}",
                              *([f"--train_rows={rows}"] if rows else [])),
                             readers.nothing, ("train.tsv", "dev.tsv"), cost_s=2, report=False))
    if "squad" in tasks:
        found.append(Run("data-squad", "studies.tools",
                         ("squad_split", "--src={shared}/squad/dev-v1.1.json", "--out={out}",
                          f"--max_questions={recipe.squad_questions}", "--whole_paragraphs"),
                         readers.nothing, ("train.json", "eval.json"), cost_s=2, report=False))
    if "swag" in tasks:  # the multiple-choice proxy set of the book kept out of pre-training; smoke: its first rows
        book = Run("data-swag-book" if scale == "smoke" else "data-swag", "bert_tf.tasks.multiple_choice.proxy_set",
                   (f"--input={{shared}}/corpus/books/{HELD_OUT_BOOK}", "--output_dir={out}"), readers.nothing,
                   ("train.csv", "val.csv"), cost_s=5, report=False)
        found.append(book)
        if scale == "smoke":
            found.append(Run("data-swag", "studies.tools",
                             ("multiple_choice_subset", "--src={run:data-swag-book}", "--train_rows=32",
                              "--dev_rows=32", "--out={out}"),
                             readers.nothing, ("train.csv", "val.csv"), cost_s=2, report=False))
    if "ner_ft" in tasks or "ner_fb" in tasks:
        train, dev = recipe.conll_documents
        found.append(Run("data-conll", "studies.tools",
                         ("conll_subset", "--src={shared}/conll2003", f"--documents={train}",
                          f"--eval_documents={dev}", "--out={out}"),
                         readers.nothing, ("train.txt", "valid.txt"), cost_s=2, report=False))
    return found


def task_scores(task: str):
    """A fine-tuning run's dev figures in percent, named by task: MRPC/SST-2/SWAG accuracy (and F1) from
    eval_results.txt, SQuAD EM and F1 from eval_results.json, NER conlleval F1 of eval_predictions.txt."""
    from studies import readers

    prefix = task.lower().replace("-", "")

    def read(out: str, folders) -> dict[str, float]:
        if task in ("MRPC", "SST-2", "swag"):
            found = readers.eval_results()(out, folders)
            figures = {"accuracy": 100 * found["eval_accuracy"]} | ({"f1": 100 * found["f1"]} if "f1" in found else {})
        elif task == "squad":
            found = readers.json_results("eval_results.json")(out, folders)
            figures = {"exact_match": found["exact_match"], "f1": found["f1"]}
        else:
            from bert_tf.tasks.ner import conlleval

            result = conlleval.evaluate(conlleval.read_predictions(f"{out}/eval_predictions.txt"))
            figures = {"f1": result.f1}
        return {f"{prefix}_{name}": value for name, value in figures.items()}
    return read


def finetune_plan(scale: str, seeds, rows: tuple[str, ...], tasks: dict[str, float],
                  smoke: tuple[tuple[str, ...], tuple[str, ...]]) -> list[Run]:
    """A fine-tuning table's runs: its data, then every row's variant on every task for every seed; `tasks`:
    {task: machine minutes per run}; `smoke`: the (rows, tasks) of the smoke plan."""
    rows, chosen = smoke if scale == "smoke" else (rows, tuple(tasks))
    found = data_runs(scale, chosen)
    for seed in seeds:
        for name in rows:
            for task in chosen:
                found += finetune_run(task, VARIANTS[name], seed, scale, tasks[task])
    return found


def finetune_run(task: str, variant: Variant, seed: int, scale: str, minutes: float) -> list[Run]:
    """`variant` fine-tuned on `task` (MRPC, SST-2, squad, swag, ner_ft, ner_fb) with the study recipe (lr 1e-4,
    batch 32, warm-up 10%; SWAG batch 16, the paper's; NER fine-tuned 3 epochs; the feature-based BiLSTM on the last
    four layers at lr 1e-3 for 4 epochs), preceded by its frozen random encoder for random init's feature-based
    row."""
    from studies import readers

    recipe, smoke, read = RECIPES[scale], scale == "smoke", task_scores(task)
    key = f"{task.lower().replace('-', '')}-{variant.name}-s{seed}"
    labels = {"task": task, "variant": variant.name, "seed": seed}
    cost = 20.0 if smoke else minutes * 60

    def common(learning_rate: str = "1e-4", epochs: float = recipe.finetune_epochs,
               batch: int = 32) -> tuple[str, ...]:
        return ("--do_train", f"--train_batch_size={8 if smoke else batch}", f"--learning_rate={learning_rate}",
                f"--num_train_epochs={epochs}", "--warmup_proportion=0.1", f"--seed={seed}", "--output_dir={out}",
                *model_flags(variant, scale), *strategy_flags(scale))

    if task in ("MRPC", "SST-2"):
        flags = (f"--task_name={task}", f"--data_dir={{run:data-{task}}}", "--do_eval",
                 f"--max_seq_length={128 if task == 'MRPC' else 64}", *common())
        return [Run(key, "bert_tf.tasks.classifier", flags, read, ("eval_results.txt",), labels, cost)]
    if task == "squad":
        flags = ("--train_file={run:data-squad}/train.json", "--do_predict", "--predict_file={run:data-squad}/eval.json",
                 "--max_seq_length=128", "--doc_stride=96", "--max_query_length=32", *common())
        return [Run(key, "bert_tf.tasks.squad.program", flags, read, ("eval_results.json",), labels, cost)]
    if task == "swag":
        flags = ("--task_name=swag", "--data_dir={run:data-swag}", "--do_eval", "--max_seq_length=128",
                 *common(batch=16))
        return [Run(key, "bert_tf.tasks.multiple_choice.program", flags, read, ("eval_results.txt",), labels, cost)]
    ner = ("--data_dir={run:data-conll}", f"--label_list={LABELS}", "--do_eval", "--max_seq_length=128")
    if task == "ner_ft":
        flags = (*ner, *common(epochs=1.0 if smoke else 3.0))
        return [Run(key, "bert_tf.tasks.ner.program", flags, read, ("eval_predictions.txt",), labels, cost)]
    runs, encoder = [], ()
    if not variant.pretrained:
        runs.append(Run(f"encoder-s{seed}", "studies.tools",
                        ("random_encoder", f"--config={config_file(variant, scale)}", f"--seed={seed}", "--out={out}"),
                        readers.nothing, ("bert_model.ckpt.index",), cost_s=15, report=False))
        encoder = (f"--init_checkpoint={{run:encoder-s{seed}}}",)
    flags = (*ner, *common("1e-3", 1.0 if smoke else 4.0), *encoder, "--mode=feature_based",
             "--features=concat_last_four", f"--lstm_units={recipe.lstm_units}", "--feature_cache_dir={out}/frozen")
    return runs + [Run(key, "bert_tf.tasks.ner.program", flags, read, ("eval_predictions.txt",), labels, cost)]


LABELS = "O,B-LOC,I-LOC,B-MISC,I-MISC,B-ORG,I-ORG,B-PER,I-PER"  # run_ner's order of CoNLL-2003's tags
