"""Forward and training-step throughput of our BERT vs KerasHub and Hugging Face torch, each in its own process.

Every contender (ours, KerasHub, HF torch with its stock full-vocabulary MLM head, HF torch with the MLM head gathered
at the masked positions) runs each timed window in a fresh process of its own (`bench/model_contender.py`), and the
contenders alternate: A B C D A B C D ... so a busy moment on the shared machine falls on all of them alike and no
two libraries' thread pools ever share the cores. Each process keeps its library's thread defaults. The reported
figure is the median over windows with the min–max spread; the 1-minute load average is recorded around each window.

The peak is measured the same way: one process per library (TensorFlow, numpy, torch; `bench/matmul_peak.py`)
timing float32 matmuls at BERT's own GEMM shapes, before and after the models; the peak of a config is the best
library's GFLOP/s over one forward's mix of those shapes. The theoretical FMA peak of the CPU is stated beside it.

    python bench/bench_model.py                       # small + base, all contenders, writes docs/benchmarks.md
    python bench/bench_model.py --configs=small --contenders=ours,hf_torch_gathered --no_write
    python bench/bench_model.py --avx2_only --no_write  # oneDNN/MKL/OpenBLAS held to AVX2 kernels
    python bench/bench_model.py --smoke               # tiny shapes, about a minute
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._cpu import AVX2_ONLY_ENV, CpuInfo, read_cpu  # noqa: E402
from bench._shapes import CONFIGS, Shape, forward_flops_per_seq  # noqa: E402
from bench.matmul_peak import LIBRARIES  # noqa: E402
from bench.model_contender import CONTENDERS  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_STEPS = {"small": 3, "base": 1, "tiny": 2}
# Earlier figures of our training step, for reading the new ones: same-process method, this machine, commit d4d0398.
PREVIOUS = {"small": 36.81, "base": 2.56}


def run_worker(script: str, args: list[str], env: dict[str, str], raw_path: str | None = None) -> dict:
    """Runs one benchmark process to completion; its RESULT line as a dict, or {"error": ...}.

    With `raw_path`, the result is also appended there as a JSON line, so a long run interrupted part-way keeps
    every finished window (see --report_only).
    """
    result = _run_process(script, args, env)
    if raw_path:
        with open(raw_path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(result | {"script": script}) + "\n")
    return result


def _run_process(script: str, args: list[str], env: dict[str, str]) -> dict:
    load_before = os.getloadavg()[0]
    done = subprocess.run([sys.executable, os.path.join(HERE, script), *args], capture_output=True, text=True,
                          env=env, check=False)
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT "):])
            result["driver_load"] = (load_before, os.getloadavg()[0])
            return result
    tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
    return {"error": f"exit {done.returncode}: " + " | ".join(tail)}


def measure_peaks(args: argparse.Namespace, env: dict[str, str]) -> list[dict]:
    """One matmul-peak process per library, in turn."""
    results = []
    for library in LIBRARIES:
        result = run_worker("matmul_peak.py", ["--library", library, "--configs", ",".join(args.configs),
                                               *shape_args(args), "--repeats", str(args.peak_repeats)], env,
                            args.raw)
        print(f"peak {library}: {json.dumps(result)[:300]}", flush=True)
        results.append(result | {"library": library})
    return results


def shape_args(args: argparse.Namespace) -> list[str]:
    return ["--batch_size", str(args.batch_size), "--seq_len", str(args.seq_len),
            "--num_masked", str(args.num_masked)]


def measure_config(config: str, args: argparse.Namespace, env: dict[str, str]) -> dict[str, list[dict]]:
    """Interleaved windows: every contender once per round, `windows` rounds, each window a fresh process."""
    windows: dict[str, list[dict]] = {c: [] for c in args.contenders}
    steps = args.steps or DEFAULT_STEPS[config]
    for round_index in range(args.windows):
        for contender in args.contenders:
            start = time.perf_counter()
            result = run_worker("model_contender.py", [
                "--contender", contender, "--config", config, "--window", "--steps", str(steps),
                "--warmup", str(args.warmup), *shape_args(args), *(["--jit_compile"] if args.jit_compile else [])],
                env, args.raw)
            windows[contender].append(result)
            summary = result.get("error") or (f"forward {seq_per_s(result, 'forward_s'):.2f} seq/s, "
                                              f"train {seq_per_s(result, 'train_s'):.2f} seq/s")
            print(f"[{config} round {round_index + 1}/{args.windows}] {contender}: {summary} "
                  f"({time.perf_counter() - start:.0f}s, load {os.getloadavg()[0]:.2f})", flush=True)
    return windows


def read_raw(path: str, args: argparse.Namespace) -> tuple[list[dict], dict[str, dict[str, list[dict]]]]:
    """Peak runs and per-config windows saved by --raw, in the order they ran."""
    peak_runs: list[dict] = []
    windows: dict[str, dict[str, list[dict]]] = {c: {k: [] for k in args.contenders} for c in args.configs}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            result = json.loads(line)
            if result.get("script") == "matmul_peak.py":
                peak_runs.append(result)
            elif result.get("config") in windows and result.get("contender") in args.contenders:
                windows[result["config"]][result["contender"]].append(result)
    return peak_runs, windows


def seq_per_s(window: dict, phase: str) -> float:
    """Sequences per second over one window's timed steps of `phase` ("forward_s" or "train_s")."""
    return window["batch_size"] * len(window[phase]) / sum(window[phase])


def best_peaks(peak_runs: list[dict]) -> dict[str, dict[str, float]]:
    """library -> config -> best forward-mix GFLOP/s over all of that library's peak processes."""
    best: dict[str, dict[str, float]] = {}
    for run in peak_runs:
        for config, figures in run.get("configs", {}).items():
            lib = best.setdefault(run["library"], {})
            lib[config] = max(lib.get(config, 0.0), figures["forward_mix"])
    return best


def best_per_shape(peak_runs: list[dict], library: str, config: str) -> dict[str, float]:
    shapes: dict[str, float] = {}
    for run in peak_runs:
        if run.get("library") == library and config in run.get("configs", {}):
            for label, value in run["configs"][config]["per_shape"].items():
                shapes[label] = max(shapes.get(label, 0.0), value)
    return shapes


# ---------------------------------------------------------------------------------------------- report

def peak_section(peak_runs: list[dict], configs: list[str], cpu: CpuInfo) -> str:
    """Markdown: the measured matmul peaks per library and shape, and the theoretical FMA peak."""
    best = best_peaks(peak_runs)
    threads = {run["library"]: run.get("threads", "?") for run in peak_runs if "threads" in run}
    lines = [f"Matmul peak on {cpu.label()}, float32, each library alone in its process, best of "
             f"{sum(1 for r in peak_runs if r.get('library') == 'numpy')} processes per library; GFLOP/s:", "",
             "| library (threads) | config | " + " | ".join(f"shape {k + 1}" for k in range(4))
             + " | one forward's GEMM mix |", "|---|---|" + "---:|" * 5]
    for library in LIBRARIES:
        for config in configs:
            shapes = best_per_shape(peak_runs, library, config)
            if not shapes:
                continue
            cells = " | ".join(f"{label}: {value:.0f}" for label, value in shapes.items())
            lines.append(f"| {library} ({threads.get(library, '?')}) | {config} | {cells} | "
                         f"**{best[library][config]:.0f}** |")
    peaks = {c: max(best[lib].get(c, 0.0) for lib in best) for c in configs} if best else {}
    lines += ["", "Peak used for % below (best library, forward mix): "
              + ", ".join(f"{c} {v:.0f} GFLOP/s" for c, v in peaks.items()) + f"; {cpu.peak_sentence()}."]
    if peaks and max(peaks.values()) > cpu.fma_peak_gflops():
        implied = max(peaks.values()) / cpu.fma_peak_gflops() * cpu.reported_mhz / 1000
        lines[-1] += (f" The measured peak is above that figure, so the cores run at ≥ {implied:.2f} GHz "
                      "(boost) during the matmuls.")
    return "\n".join(lines)


def contender_row(windows: list[dict], peak: float, ours: list[dict]) -> str:
    """One table row: median (min–max) of forward and train seq/s over windows, GFLOP/s, % of peak, and the median
    over rounds of this contender's seq/s over ours in the same round (neighbouring windows see the same load)."""
    good = [w for w in windows if "error" not in w]
    if not windows:
        return "| (not measured) | — | — | — | — | — | | |"
    if not good:
        return f"| {windows[0].get('name', '?')} | — | — | — | — | — | | {windows[0]['error'][:200]} |"
    forward = [seq_per_s(w, "forward_s") for w in good]
    train = [seq_per_s(w, "train_s") for w in good]
    gflops = 3 * good[0]["forward_flops_per_seq"] * statistics.median(train) / 1e9
    loads = ", ".join(f"{w['driver_load'][0]:.1f}→{w['driver_load'][1]:.1f}" for w in good)
    note = f"loss {good[0]['loss_first']:.2f}→{good[0]['loss_last']:.2f}; {good[0]['note']}"
    return (f"| {good[0]['name']} | **{statistics.median(forward):.2f}** ({min(forward):.2f}–{max(forward):.2f}) | "
            f"**{statistics.median(train):.2f}** ({min(train):.2f}–{max(train):.2f}) | {gflops:.1f} | "
            f"{100 * gflops / peak:.0f}% | {same_round_ratio(windows, ours, 'forward_s')} / "
            f"{same_round_ratio(windows, ours, 'train_s')} | {loads} | {note} |")


def same_round_ratio(windows: list[dict], ours: list[dict], phase: str) -> str:
    """Median over rounds of (this contender's seq/s) / (ours in the same round), as text; '' if none."""
    ratios = [seq_per_s(w, phase) / seq_per_s(o, phase) for w, o in zip(windows, ours)
              if "error" not in w and "error" not in o]
    return f"{statistics.median(ratios):.2f}×" if ratios else "—"


def config_section(config: str, windows: dict[str, list[dict]], peak: float, args: argparse.Namespace,
                   cpu: CpuInfo) -> str:
    dims, steps = CONFIGS[config], args.steps or DEFAULT_STEPS[config]
    shape = Shape(args.batch_size, args.seq_len, args.num_masked)
    header = (f"### {config} on {cpu.label()}: L={dims.num_layers}, H={dims.hidden_size}, A={dims.num_heads}, "
              f"I={dims.intermediate_size}, vocab {dims.vocab_size}; batch {shape.batch_size}, seq {shape.seq_len}, "
              f"{shape.num_masked} masked; {args.windows} interleaved windows per contender, each a fresh process: "
              f"{args.warmup} warm-up + {steps} timed forward passes, then {args.warmup} warm-up + {steps} timed "
              f"training steps; forward {forward_flops_per_seq(dims, shape) / 1e9:.2f} GFLOP/seq with the "
              f"gathered MLM head; % of the {peak:.0f} GFLOP/s BERT-shape matmul peak")
    lines = ["| model | forward seq/s median (min–max) | train seq/s median (min–max) | train GFLOP/s | "
             "% of peak | vs ours, same round (forward / train) | load 1-min per window | note |",
             "|---|---:|---:|---:|---:|---:|---|---|"]
    ours = windows.get("ours", [])
    lines += [contender_row(windows[c], peak, ours) for c in args.contenders]
    return header + "\n\n" + "\n".join(lines)


NOTES = ("Training step = forward + loss (MLM + NSP) + backward + AdamW update, dropout on, no gradient clipping; "
         "each model with its own optimizer: ours `bert_tf.training.optimization.AdamWeightDecay` (the original's, "
         "on TF's fused Adam kernel), KerasHub `keras.optimizers.AdamW`, HF `torch.optim.AdamW`; forward = "
         "inference. Our training step runs GELU and LayerNorm on bert_tf's fused CPU kernels "
         "(`bert_tf/model/custom_ops.cc`). GFLOP/s counts the matmul FLOPs each model actually runs (the stock HF "
         "head projects all positions onto the vocabulary), training = 3 × forward. Method: each contender and each "
         "window in its own process (`bench/model_contender.py`), contenders alternating A B C D A B C D; each "
         "library with its own thread defaults (TensorFlow: intra-op pool = all cores; torch: one thread per core); "
         "median over windows, (min–max) the spread. The machine is shared with other engineers' test runs: the "
         "load column is the 1-minute load average before→after each window.")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--configs", default="small,base", help="comma list of: " + ", ".join(CONFIGS))
    p.add_argument("--contenders", default=",".join(CONTENDERS), help="comma list of: " + ", ".join(CONTENDERS))
    p.add_argument("--windows", type=int, default=3, help="interleaved windows (processes) per contender")
    p.add_argument("--steps", type=int, default=None, help="timed steps per phase and window (default: per config)")
    p.add_argument("--warmup", type=int, default=1, help="untimed steps before each phase (includes tracing)")
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--seq_len", type=int, default=128)
    p.add_argument("--num_masked", type=int, default=20)
    p.add_argument("--jit_compile", action="store_true", help="XLA-compile the Keras models' tf.functions")
    p.add_argument("--peak_repeats", type=int, default=5, help="timed rounds per matmul shape")
    p.add_argument("--avx2_only", action="store_true",
                   help="hold oneDNN, MKL and OpenBLAS to AVX2 kernels (" + ", ".join(AVX2_ONLY_ENV) + ")")
    p.add_argument("--raw", default=None, help="append every process's result to this JSON-lines file")
    p.add_argument("--report_only", default=None,
                   help="measure nothing: report the windows and peaks saved in this --raw file")
    p.add_argument("--command", default=None, help="the command to record in the doc (default: this one)")
    p.add_argument("--no_write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    p.add_argument("--smoke", action="store_true", help="tiny shapes and steps, for tests and development")
    args = p.parse_args(argv)
    args.configs = [c for c in args.configs.split(",") if c]
    args.contenders = [c for c in args.contenders.split(",") if c]
    for name in args.configs:
        if name not in CONFIGS:
            p.error(f"unknown config {name!r}")
    for name in args.contenders:
        if name not in CONTENDERS:
            p.error(f"unknown contender {name!r}")
    if args.smoke:
        args.configs, args.batch_size, args.seq_len, args.num_masked = ["tiny"], 4, 32, 5
        args.steps, args.windows, args.warmup, args.peak_repeats, args.no_write = 2, 2, 1, 2, True
    return args


def main(argv: list[str] | None = None) -> dict[str, dict[str, list[dict]]]:
    args = parse_args(argv)
    cpu = read_cpu()
    if args.avx2_only:
        cpu = dataclasses.replace(cpu, kernels="kernels held to AVX2")
    env = dict(os.environ, **(AVX2_ONLY_ENV if args.avx2_only else {}))
    start = time.perf_counter()
    print(f"{cpu.label()}; load average at start {os.getloadavg()[0]:.2f}", flush=True)
    if args.report_only:
        peak_runs, all_windows = read_raw(args.report_only, args)
    else:
        peak_runs = measure_peaks(args, env)
        all_windows = {config: measure_config(config, args, env) for config in args.configs}
        peak_runs += measure_peaks(args, env)
    best = best_peaks(peak_runs)
    peaks = {c: max((best[lib].get(c, 0.0) for lib in best), default=0.0) or float("nan") for c in args.configs}
    isa_note = (" oneDNN, MKL and OpenBLAS held to their AVX2 kernels (" +
                ", ".join(f"{k}={v}" for k, v in AVX2_ONLY_ENV.items()) + ").") if args.avx2_only else ""
    sections = [peak_section(peak_runs, args.configs, cpu) + isa_note]
    sections += [config_section(c, all_windows[c], peaks[c], args, cpu) for c in args.configs]
    print("\n" + "\n\n".join(sections) + f"\n\n(total wall {time.perf_counter() - start:.0f}s)\n", flush=True)
    if not args.no_write:
        from bench._report import write_section
        name, title = (("model_avx2", "## Model throughput with AVX2 kernels on the same CPU") if args.avx2_only
                       else ("model", "## Model throughput"))
        write_section(name, title + "\n\n" + NOTES + "\n\n" + "\n\n".join(sections), args.command)
    return all_windows


if __name__ == "__main__":
    main()
