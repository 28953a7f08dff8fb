"""The SQuAD benchmark's fidelity checks: ours and Hugging Face with every random mask off, then with dropout on
and the same masks on both sides (bench_squad.py --phase=fidelity).

With dropout on, one seed's EM/F1 gap mixes the two frameworks' arithmetic with their different dropout masks. Here
both train the whole recipe (lr, batch, 2 epochs, warmup, the original's AdamWeightDecay and clipping) from the same
seeded head, on the same cached windows in the same batch order, on the first articles of each half of
dev-v1.1.json, either with the config's dropout 0 (label "fidelity") or with dropout 0.1 and transformers drawing
the masks our run drew (bench/_shared_masks.py; label "fidelity_masks"): any gap left (per-step loss, logits,
official figures) is arithmetic.
"""
from __future__ import annotations

import json
import os
import sys

import numpy as np

from bench._classifier_fidelity import no_dropout_config, step_losses
from bench._classifier_runs import (HF_ACCURACY_THREADS, fresh_dir, git_commit, load_result, log_tail, run_logged,
                                    save_result)
from bench._cpu import read_cpu
from bench._squad_runs import (VERSIONS, hf_command, mask_keys_file, official_figures, program_flags, replay,
                               split_by_article, training_flags)

VERSION = VERSIONS["v1.1"]


def _suffix(shared_masks: bool) -> str:
    """What the shared-mask check adds to the names of its result and run folders."""
    return "_masks" if shared_masks else ""


def _label(shared_masks: bool) -> str:
    return "fidelity" + _suffix(shared_masks)


def fidelity_files(work_dir: str, articles: int) -> tuple[str, str]:
    """(train, eval) SQuAD files: the first `articles` articles of each half of the accuracy runs' split."""
    folder = os.path.join(work_dir, "fidelity", "data")
    os.makedirs(folder, exist_ok=True)
    paths = []
    for source in split_by_article(work_dir, VERSION):
        with open(source, encoding="utf-8") as f:
            squad = json.load(f)
        path = os.path.join(folder, f"first-{articles}-{os.path.basename(source)}")
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump({**squad, "data": squad["data"][:articles]}, f)
        os.replace(path + ".tmp", path)
        paths.append(path)
    return paths[0], paths[1]


def _finished(folder: str, *names: str) -> bool:
    return all(os.path.exists(os.path.join(folder, name)) for name in names)


def _train_ours(work_dir: str, train: str, evaluate: str, shared_masks: bool) -> str | None:
    """Our program, --steps_per_loop=1 (a loss per step), dropout off or (shared_masks) on; its folder, or None after
    an error saved."""
    ours_dir = os.path.join(work_dir, "fidelity", "ours" + _suffix(shared_masks))
    if _finished(ours_dir, "raw_logits.jsonl", "eval_results.json"):
        return ours_dir
    fresh_dir(ours_dir)
    config = None if shared_masks else no_dropout_config(work_dir)
    code, _, _ = run_logged([sys.executable, "-m", "bert_tf.tasks.squad.program", "--do_predict", "--steps_per_loop=1",
                             *program_flags(work_dir, VERSION, ours_dir, evaluate, config),
                             *training_flags(work_dir, 1, train)], ours_dir + ".log")
    if code:
        save_result(work_dir, _label(shared_masks), {"error": f"ours exit {code}: {log_tail(ours_dir + '.log')}"})
        return None
    return ours_dir


def _train_hf(work_dir: str, ours_dir: str, evaluate: str, shared_masks: bool) -> str | None:
    """transformers with --dropout=0, or with our run's masks, on our windows and batch order, replayed through our
    program."""
    hf_dir = os.path.join(work_dir, "fidelity", "hf" + _suffix(shared_masks))
    if _finished(hf_dir, "result.json", "eval_results.json"):
        return hf_dir
    fresh_dir(hf_dir)
    extra = f"--mask_keys={mask_keys_file(work_dir, ours_dir)}" if shared_masks else "--dropout=0"
    command = hf_command(work_dir, VERSION, ours_dir, 1, hf_dir, HF_ACCURACY_THREADS, extra)
    code, _, line = run_logged(command, hf_dir + ".log")
    if code or not line:
        save_result(work_dir, _label(shared_masks), {"error": f"hf exit {code}: {log_tail(hf_dir + '.log')}"})
        return None
    code, replay_log = replay(work_dir, VERSION, hf_dir, evaluate)
    if code:
        save_result(work_dir, _label(shared_masks), {"error": f"replay exit {code}: {log_tail(replay_log)}"})
        return None
    return hf_dir


def read_logits(path: str) -> dict[int, np.ndarray]:
    """unique_id -> [2, seq] start and end logits of a raw_logits.jsonl."""
    with open(path, encoding="utf-8") as f:
        rows = (json.loads(line) for line in f)
        return {row["unique_id"]: np.array([row["start_logits"], row["end_logits"]]) for row in rows}


def max_logit_diff(ours: dict[int, np.ndarray], hf: dict[int, np.ndarray]) -> float:
    if ours.keys() != hf.keys():
        raise ValueError(f"the two raw_logits.jsonl cover different windows ({len(ours)} vs {len(hf)})")
    return float(max(np.max(np.abs(ours[k] - hf[k])) for k in ours))


def same_answers(ours_dir: str, hf_dir: str) -> tuple[int, int]:
    """(questions whose predicted answer text is the same on both sides, questions)."""
    def answers(folder: str) -> dict[str, str]:
        with open(os.path.join(folder, "predictions.json"), encoding="utf-8") as f:
            return json.load(f)

    ours, hf = answers(ours_dir), answers(hf_dir)
    return sum(ours[q] == hf.get(q) for q in ours), len(ours)


def fidelity_phase(work_dir: str, articles: int, shared_masks: bool = False) -> dict | None:
    """Both sides, dropout off (or on with shared masks), the whole recipe on `articles` articles per half; the
    comparison, saved once (a side whose outputs are complete is not run again)."""
    label = _label(shared_masks)
    done = load_result(work_dir, label)
    if done and "error" not in done:
        return done
    train, evaluate = fidelity_files(work_dir, articles)
    ours_dir = _train_ours(work_dir, train, evaluate, shared_masks)
    hf_dir = ours_dir and _train_hf(work_dir, ours_dir, evaluate, shared_masks)
    if not hf_dir:
        return None
    with open(os.path.join(hf_dir, "result.json"), encoding="utf-8") as f:
        hf_run = json.load(f)
    ours_losses, hf_losses = step_losses(ours_dir + ".log"), hf_run["losses"]
    ours_logits, hf_logits = (read_logits(os.path.join(d, "raw_logits.jsonl")) for d in (ours_dir, hf_dir))
    return save_result(work_dir, label, {
        "articles": articles, "shared_masks": shared_masks,
        "train_windows": hf_run["train_rows"],  # our windows, as HF read them
        "steps": len(ours_losses), "predict_windows": len(ours_logits), "ours_losses": ours_losses,
        "hf_losses": hf_losses, "max_loss_diff": max(abs(a - b) for a, b in zip(ours_losses, hf_losses)),
        "max_logit_diff": max_logit_diff(ours_logits, hf_logits), "same_answers": same_answers(ours_dir, hf_dir),
        "ours_scores": official_figures(ours_dir, VERSION),
        "hf_scores": official_figures(hf_dir, VERSION), "commit": git_commit(), "cpu": read_cpu().label()})


def _articles(count: int) -> str:
    return "article" if count == 1 else f"{count} articles"


CHECKS = ((False, "### Same recipe? A check without random masks (v1.1)",
           "Both sides with the config's dropout 0 (no random mask anywhere)"),
          (True, "### Same recipe with dropout on: our masks on both sides (v1.1)",
           "Both sides with the config's dropout 0.1, transformers drawing the very masks our run drew "
           "(bench/_shared_masks.py; tests/test_dropout_parity.py holds a training-mode forward pass and its "
           "gradients equal to transformers' in float64 under them)"))


def fidelity_lines(work_dir: str) -> list[str]:
    """The report's paragraphs on the two checks (each once it has run)."""
    lines = []
    for shared_masks, heading, how in CHECKS:
        result = load_result(work_dir, _label(shared_masks))
        if not result:
            continue
        ours, hf = result["ours_scores"], result["hf_scores"]
        figures = "; ".join(f"{key} ours {ours[key]:.2f} vs HF {hf[key]:.2f}" for key in VERSION.scores if key in ours)
        lines += [heading, "",
                  f"{how}, the whole recipe from the seed-1 head on the first {_articles(result['articles'])} of each "
                  f"half ({result['train_windows']} training windows, {result['steps']} steps; "
                  f"{result['predict_windows']} prediction windows), same windows and batch order: per-step training "
                  f"loss max |difference| {result['max_loss_diff']:.4f} (our log prints 4 decimals), start/end "
                  f"logits max |difference| {result['max_logit_diff']:.4f}; the same answer text for "
                  f"{result['same_answers'][0]} of the {result['same_answers'][1]} questions; {figures}. At commit "
                  f"{result['commit']}, {result['cpu']}.", ""]
    return lines
