"""The paper's pre-training ablations at this machine's scale: Table 5 (NSP, LTR) and Table 8 (masking rates), plus
dynamic masking and a random init, each a BERT-Mini pre-trained from the same records and fine-tuned on MRPC, SST-2,
a SQuAD v1.1 article split and CoNLL-2003 (fine-tuned and feature-based); and run_swag.py on the multiple-choice
proxy set, pre-trained against random init.

Every step is one process of our real programs (prepare_corpus, create_pretraining_data, run_pretraining,
run_classifier, run_squad, run_ner, run_swag); each finished step leaves its result in WORK/results/, so a stopped
study resumes where it was. Runs go --jobs at a time, each on cores / jobs TensorFlow threads.

Phases:
* pretrain: the corpus, the record sets, every variant's pre-training and held-out perplexity;
* finetune: every variant on every task for --seeds (pre-training first where it is missing);
* swag: run_swag.py from random init, this study's MLM + NSP model, and MiniLM-L6's real weights (and its shape at
  random init);
* report: only re-render docs/benchmarks.md (section "ablations") and docs/ablations_curves.svg;
* helps_report: only re-render section "pretraining_helps" (issue #13: our BERT-Mini pre-trained against random
  init on SST-2) from the result folders of --helps_folders, one pre-training scale each.

    python bench/bench_ablations.py --phase=finetune --seeds=1
    python bench/bench_ablations.py --phase=finetune --seeds=2 --variants=mlm_nsp,mlm,mask100,dynamic
    python bench/bench_ablations.py --phase=swag
    python bench/bench_ablations.py --phase=report
    python bench/bench_ablations.py --phase=pretrain --variants=mlm_nsp --pretrain_steps=6000 \
        --pretrain_learning_rate=5e-4 --work_dir=/work/mini6k  (then --phase=finetune --tasks=sst2
        --variants=mlm_nsp,random_init --seeds=1,2, and --phase=helps_report)
    python bench/bench_ablations.py --phase=finetune --smoke --work_dir=/tmp/ablations_smoke --no_write
"""
from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import os
import resource
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench import _ablation_pretrain as pretraining  # noqa: E402
from bench import _ablation_tasks as tasks  # noqa: E402
from bench._ablation_report import report  # noqa: E402
from bench._pretraining_helps import report as helps_report  # noqa: E402
from bench._classifier_runs import MINILM, load_result, save_result  # noqa: E402
from bench._report import comma_list, known_names, run_phase, write_section  # noqa: E402

PHASES = ("pretrain", "finetune", "swag", "report", "helps_report")
SMOKE_SCALE = dict(steps=4, batch=8, steps_per_loop=2, dupe_factor=1)
SMOKE_RECIPE = dict(epochs=1.0, mrpc_examples=64, sst2_examples=64, squad_questions=40,
                    ner_train_documents=3, ner_eval_documents=2, ner_epochs=1.0, lstm_units=8, feature_epochs=1.0,
                    swag_train_examples=32, batch=8)


def thread_env(jobs: int, threads: int = 0) -> dict[str, str]:
    """TensorFlow's thread counts for one of `jobs` concurrent runs: `threads`, or the cores shared out."""
    threads = str(threads or max(1, (os.cpu_count() or 1) // jobs))
    return {"TF_NUM_INTRAOP_THREADS": threads, "TF_NUM_INTEROP_THREADS": threads, "OMP_NUM_THREADS": threads}


def pretrain_variant(args: argparse.Namespace, variant: pretraining.Variant, env: dict) -> None:
    done = load_result(args.work_dir, f"pretrain-{variant.name}") or {}
    if variant.pretrained and any(f"perplexity{suffix}" not in done for suffix in variant.held_out_rules):
        result = pretraining.pretrain(args.work_dir, variant, args.scale, env)
        save_result(args.work_dir, f"pretrain-{variant.name}", {"variant": variant.name, **result})


def variant_chain(args: argparse.Namespace, variant: pretraining.Variant, env: dict) -> None:
    """One worker's share: the variant's pre-training, then (phase finetune) its runs on every task and seed."""
    pretrain_variant(args, variant, env)
    if args.phase == "finetune":
        for seed in args.seeds:
            for task in args.tasks:  # random init's feature-based row: a frozen random encoder, the control
                tasks.run(task, args.work_dir, args.files, variant, args.recipe, seed, env)


def make_records(args: argparse.Namespace) -> None:
    """Every record set the chosen variants read, one after another (create_pretraining_data uses every core)."""
    for variant in args.variants:
        if variant.pretrained:
            pretraining.records(args.work_dir, args.scale, variant.records, variant.mask_token_prob,
                                variant.random_token_prob)
        for rule in variant.held_out_rules.values():
            pretraining.records(args.work_dir, args.scale, "heldout", *rule, held_out=True)


def in_pool(args: argparse.Namespace, work: list) -> None:
    """Runs the (function, argument) items --jobs at a time; the first failure is raised once all have stopped."""
    env = thread_env(args.jobs, args.threads)
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(function, args, item, env) for function, item in work]
        for future in futures:
            future.result()


def study_phase(args: argparse.Namespace) -> None:
    make_records(args)
    unigram = load_result(args.work_dir, "unigram") or {}
    if "masked_lm_loss_all_mask" not in unigram:
        save_result(args.work_dir, "unigram", {
            key: unigram.get(key) or pretraining.unigram_loss(args.work_dir, args.scale, rule)
            for key, rule in (("masked_lm_loss", pretraining.DEFAULT_RULE),
                              ("masked_lm_loss_all_mask", pretraining.ALL_MASK_RULE))})
    tasks.prepare_data(args.work_dir, args.recipe, args.tasks if args.phase == "finetune" else [])
    in_pool(args, [(variant_chain, variant) for variant in args.variants])


def swag_run(args: argparse.Namespace, spec: tuple, env: dict) -> None:
    name, init, config, vocab = spec
    for seed in args.seeds:
        tasks.run_swag(args.work_dir, name, init, config, vocab, args.recipe, seed, env)


def swag_phase(args: argparse.Namespace) -> None:
    """Pre-trained against random init on the proxy set, for BERT-Mini (ours) and MiniLM-L6 (real weights)."""
    mini = pretraining.VARIANTS["mlm_nsp"]
    pretrain_variant(args, mini, thread_env(1, args.threads))
    minilm_config = os.path.join(args.work_dir, "minilm_bert_config.json")
    if not os.path.exists(minilm_config):
        import json
        with open(os.path.join(MINILM, "config.json"), encoding="utf-8") as f:
            config = json.load(f)
        keys = ("attention_probs_dropout_prob", "hidden_act", "hidden_dropout_prob", "hidden_size",
                "initializer_range", "intermediate_size", "max_position_embeddings", "num_attention_heads",
                "num_hidden_layers", "type_vocab_size", "vocab_size")
        with open(minilm_config, "w", encoding="utf-8") as f:
            json.dump({k: config[k] for k in keys}, f, indent=2)
    minilm_vocab = os.path.join(MINILM, "vocab.txt")
    tasks.prepare_data(args.work_dir, args.recipe, ["swag"])
    specs = [("mini_random", None, args.files.config, args.files.vocab),
             ("mini_mlm_nsp", pretraining.checkpoint(args.work_dir, mini), args.files.config, args.files.vocab),
             ("minilm", MINILM, minilm_config, minilm_vocab),
             ("minilm_random", None, minilm_config, minilm_vocab)]
    wanted = comma_list(args.swag_models)
    in_pool(args, [(swag_run, spec) for spec in specs if spec[0] in wanted])


def measured(phase):
    """`phase`, with the CPU and wall seconds of its processes added to WORK/results/cpu.json."""
    def run(args: argparse.Namespace) -> None:
        started, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        try:
            phase(args)
        finally:
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
            total = load_result(args.work_dir, "cpu") or {"cpu_s": 0.0, "wall_s": 0.0}
            save_result(args.work_dir, "cpu", {"cpu_s": total["cpu_s"] + cpu, "jobs": args.jobs,
                                               "wall_s": total["wall_s"] + time.perf_counter() - started})
    return run


OPTIONS = (  # (flag, type, default, help) after --phase
    ("variants", str, ",".join(pretraining.VARIANTS), "comma list of variants"),
    ("tasks", str, ",".join(tasks.TASKS), "comma list of fine-tuning tasks"),
    ("seeds", str, "1", "comma list of fine-tuning seeds (pre-training always uses seed 12345)"),
    ("swag_models", str, "mini_random,mini_mlm_nsp,minilm,minilm_random", "phase swag: which models run"),
    ("jobs", int, 2, "runs at a time, each with cores / jobs TensorFlow threads"),
    ("threads", int, 0, "TensorFlow threads per run (0: cores / jobs; 1 beside other work)"),
    ("pretrain_steps", int, 3000, "pre-training steps of every variant"),
    ("pretrain_batch", int, 32, "pre-training batch size"),
    ("pretrain_learning_rate", float, 2e-4, "pre-training peak learning rate (10%% warmup, linear decay); 1e-3 "
     "stayed on the unigram plateau for 1,000 steps"),
    ("pretrain_precision", str, "mixed_bfloat16", "pre-training --mixed_precision (bfloat16 matmuls as on the "
     "paper's TPUs; 1.37x the float32 step rate here)"),
    ("pretrain_seq_length", int, 128, "pre-training sequence length (fine-tuning keeps each task's)"),
    ("pretrain_predictions", int, 20, "masked positions per pre-training sequence"),
    ("pretrain_dupe_factor", int, 10, "create_pretraining_data --dupe_factor of the training records (the "
     "original's default: each document masked 10 ways, so that the steps do not revisit one static mask)"),
    ("pretrain_corpus", str, "wiki_books", "what the pre-training reads: " + "; ".join(
        f"{name}: {text}" for name, text in pretraining.CORPORA.items())),
    ("pretrain_init_checkpoint", str, "", "continue pre-training from this original-format export (domain-"
     "adaptive pre-training) instead of from scratch"),
    ("finetune_learning_rate", float, tasks.Recipe.learning_rate, "fine-tuning learning rate of the classifier, "
     "SQuAD, fine-tuned NER and SWAG runs"),
    ("finetune_epochs", float, tasks.Recipe.epochs, "fine-tuning epochs of the classifier, SQuAD and SWAG runs "
     "(NER: its own recipe's)"),
    ("sst2_examples", int, tasks.Recipe.sst2_examples, "SST-2 training sentences the runs fine-tune on (the "
     "first N of train.tsv)"),
    ("vocab_size", int, 0, "0: the shared bert-base-uncased vocab; N: a WordPiece vocab of N learned from the "
     "study's corpus (cheaper output layer)"),
    ("work_dir", str, "/tmp/bench_ablations", "corpus, records, runs and saved results"),
    ("helps_folders", str, "bench/results/bench_ablations_d10", "phase helps_report: comma list of result "
     "folders (a work dir's results/ or its copy in bench/results), one pre-training scale each"),
    ("command", str, None, "the command to record in the doc (default: this one)"),
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--phase", default="finetune", choices=PHASES)
    for flag, kind, default, text in OPTIONS:
        p.add_argument("--" + flag, type=kind, default=default, help=text)
    p.add_argument("--smoke", action="store_true", help="a few steps and examples of everything (CI, a scratch "
                   "--work_dir)")
    p.add_argument("--no_write", action="store_true", help="print only; leave docs/ alone")
    args = p.parse_args(argv)
    names = known_names(p, comma_list(args.variants), pretraining.VARIANTS, "variant")
    args.variants = [pretraining.VARIANTS[name] for name in names]
    args.tasks = known_names(p, comma_list(args.tasks), tasks.TASKS, "task")
    known_names(p, [args.pretrain_corpus], pretraining.CORPORA, "corpus")
    args.seeds = comma_list(args.seeds, int)
    args.scale = pretraining.Scale(args.pretrain_steps, args.pretrain_batch, args.pretrain_learning_rate,
                                   args.pretrain_seq_length, args.pretrain_predictions, vocab_size=args.vocab_size,
                                   dupe_factor=args.pretrain_dupe_factor, mixed_precision=args.pretrain_precision,
                                   corpus=args.pretrain_corpus, init_checkpoint=args.pretrain_init_checkpoint)
    args.recipe = tasks.Recipe(learning_rate=args.finetune_learning_rate, epochs=args.finetune_epochs,
                               sst2_examples=args.sst2_examples)
    if args.smoke:
        args.scale = dataclasses.replace(args.scale, **SMOKE_SCALE)
        args.recipe = dataclasses.replace(args.recipe, **SMOKE_RECIPE)
    return args


def record_scale(args: argparse.Namespace) -> None:
    """The scale and recipe of the work dir's runs (the report states them; a change needs another --work_dir)."""
    wanted = {"pretrain": pretraining.scale_dict(args.scale), "recipe": dataclasses.asdict(args.recipe)}
    saved = load_result(args.work_dir, "scale")
    if saved:
        saved = {**saved, "pretrain": pretraining.saved_scale_dict(saved["pretrain"])}
    if saved and saved != wanted:
        raise SystemExit(f"{args.work_dir} holds runs of {saved}, not {wanted}: use another --work_dir")
    if not saved:
        save_result(args.work_dir, "scale", wanted)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.phase == "helps_report":
        body = helps_report([os.path.join(ROOT, folder) for folder in comma_list(args.helps_folders)])
        print(body)
        if not args.no_write:
            write_section("pretraining_helps", body, args.command)
        return
    if args.phase != "report":
        record_scale(args)
        args.files = pretraining.model_files(args.work_dir, args.scale)
    run_phase(args, {"pretrain": measured(study_phase), "finetune": measured(study_phase),
                     "swag": measured(swag_phase)}, report, "ablations")


if __name__ == "__main__":
    main()
