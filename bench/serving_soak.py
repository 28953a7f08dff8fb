"""A served model under load (issue #60): an exported task SavedModel, loaded as a serving host loads it, called
by concurrent clients for minutes, then sent hostile requests (studies/tables/serving_soak.py).

The host is this process: `tf.saved_model.load(FOLDER)` and its `serving_default` signature, TensorFlow and
tensorflow-text only (bert_tf is never imported, and that is checked), the way TF Serving or a Python web server
runs the same signature. Three parts, in this order:

* sweep: one client, each batch size of --batch_sizes for --sweep_seconds: items/s and p50 latency;
* soak: --clients threads, each sending requests of 1 to 8 rows (cycling) for --soak_seconds; resident memory
  (VmRSS) sampled every second, latencies per --window_seconds window: the memory slope after the first window
  (MiB per minute, least squares), p50/p99 per window, requests/s;
* hostile: empty strings, a 1 MB string, invalid UTF-8 bytes, a wrong dtype, a wrong shape, a batch of 10,000
  rows. Each must end with an answer or an error for that request within --hostile_timeout seconds, and the
  good request sent after each must get the answer it got before them (max |difference| of every float output).

    python -m bench.serving_soak --task=classifier --saved_model=EXPORT/classifier --inputs=inputs.json --out=DIR
        [--clients=4 --soak_seconds=300 --window_seconds=30 --sweep_seconds=10 --batch_sizes=1,8,32]
"""
from __future__ import annotations

import argparse
import itertools
import os
import sys
import threading
import time
from typing import Callable

import numpy as np

from bench.result import report

TASKS = ("classifier", "squad")
SIZES = (1, 2, 4, 8)  # rows per soak request, cycling
Call = Callable[..., dict]


def rss_mib() -> float:
    """This process's resident memory (VmRSS), MiB."""
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def load(task: str, folder: str):
    """The signature's callable, and a function of row strings -> its keyword arguments (tf string tensors)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer ops the SavedModel uses)

    serve = tf.saved_model.load(folder).signatures["serving_default"]
    if "bert_tf" in sys.modules:
        raise SystemExit("the served model's host imported bert_tf: it must run on TensorFlow alone")

    def arguments(rows: list) -> dict:
        if task == "classifier":
            return {"text": tf.constant(rows)}
        return {"question": tf.constant([q for q, _ in rows]), "context": tf.constant([c for _, c in rows])}

    return serve, arguments


def numeric(outputs: dict) -> dict[str, np.ndarray]:
    return {k: v.numpy() for k, v in outputs.items() if v.dtype.is_floating or v.dtype.is_integer}


def largest_difference(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> float:
    """max |a - b| over every numeric output; inf when their names or shapes differ."""
    if a.keys() != b.keys() or any(a[k].shape != b[k].shape for k in a):
        return float("inf")
    return max([float(np.max(np.abs(a[k].astype(np.float64) - b[k]))) for k in a if a[k].size] or [0.0])


def sweep(serve: Call, arguments, rows: list, sizes: list[int], seconds: float) -> list[dict]:
    """One client, each batch size for `seconds` (at least 3 calls after one warm-up): items/s, p50 ms."""
    found = []
    for size in sizes:
        batch = arguments([rows[i % len(rows)] for i in range(size)])
        serve(**batch)
        latencies, start = [], time.perf_counter()
        while len(latencies) < 3 or time.perf_counter() - start < seconds:
            t = time.perf_counter()
            serve(**batch)
            latencies.append(time.perf_counter() - t)
        found.append({"batch_size": size, "items_per_s": size * len(latencies) / sum(latencies),
                      "p50_ms": 1000 * float(np.median(latencies))})
    return found


def soak(serve: Call, arguments, rows: list, clients: int, seconds: float, window: float) -> dict:
    """`clients` threads calling for `seconds`; memory every second; latency percentiles per `window`."""
    done: list[tuple[float, float, int]] = []  # (end time from start, latency s, rows)
    memory: list[tuple[float, float]] = []
    errors: list[str] = []
    start = time.perf_counter()
    stop = threading.Event()

    def client(index: int) -> None:
        sizes = itertools.cycle(SIZES[index % len(SIZES):] + SIZES[:index % len(SIZES)])
        offset = 97 * index
        while not stop.is_set():
            size = next(sizes)
            batch = arguments([rows[(offset + i) % len(rows)] for i in range(size)])
            offset += size
            t = time.perf_counter()
            try:
                serve(**batch)
            except Exception as e:  # noqa: BLE001  (a failed good request is the finding)
                errors.append(f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")
            done.append((time.perf_counter() - start, time.perf_counter() - t, size))

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
    for thread in threads:
        thread.start()
    while time.perf_counter() - start < seconds:
        memory.append((time.perf_counter() - start, rss_mib()))
        time.sleep(1.0)
    stop.set()
    for thread in threads:
        thread.join()
    return summarize(done, memory, errors, seconds, window)


def slope_per_minute(samples: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, MiB) samples, in MiB per minute (nan under 3 samples)."""
    if len(samples) < 3:
        return float("nan")
    return float(np.polyfit([t for t, _ in samples], [m for _, m in samples], 1)[0] * 60)


def summarize(done, memory, errors, seconds: float, window: float) -> dict:
    """Windows' p50/p99, the memory slope after the first window and over the second half (MiB/min: a slope
    that falls in the second half is warm-up, one that holds is a leak), the whole soak's rates."""
    windows = []
    for w in range(max(1, int(seconds // window))):
        lat = [d[1] for d in done if w * window <= d[0] < (w + 1) * window]
        if lat:
            windows.append({"from_s": w * window, "requests": len(lat), "p50_ms": 1000 * float(np.median(lat)),
                            "p99_ms": 1000 * float(np.percentile(lat, 99))})
    settled = [(t, m) for t, m in memory if t >= min(window, seconds / 2)]
    late = [(t, m) for t, m in memory if t >= seconds / 2]
    p50s = [w["p50_ms"] for w in windows]
    return {"requests": len(done), "errors": len(errors), "first_errors": errors[:3],
            "requests_per_s": len(done) / seconds, "rows_per_s": sum(d[2] for d in done) / seconds,
            "rss_start_mib": memory[0][1], "rss_end_mib": memory[-1][1], "rss_peak_mib": max(m for _, m in memory),
            "rss_slope_mib_per_min": slope_per_minute(settled), "rss_late_slope_mib_per_min": slope_per_minute(late),
            "rss_every_10s_mib": [round(m, 1) for t, m in memory if int(t) % 10 == 0], "windows": windows,
            "p50_ms": 1000 * float(np.median([d[1] for d in done])),
            "p99_ms": 1000 * float(np.percentile([d[1] for d in done], 99)),
            "p50_drift": max(p50s) / min(p50s) if p50s else float("nan")}


def hostile_requests(task: str) -> dict[str, Callable]:
    """Each hostile request, as a function of the tf module -> the signature's keyword arguments."""
    def strings(rows):
        return lambda tf: ({"text": tf.constant(rows)} if task == "classifier"
                           else {"question": tf.constant(rows), "context": tf.constant(rows)})

    def wrong(tensor):
        return lambda tf: {name: tensor(tf) for name in (("text",) if task == "classifier" else ("question", "context"))}

    return {"empty strings": strings(["", "", ""]),
            "a 1 MB string": strings(["word " * 200_000]),
            "invalid UTF-8": strings([b"\xff\xfe not \xc3\x28 utf-8 \xed\xa0\x80"]),
            "wrong dtype (int32)": wrong(lambda tf: tf.constant([1, 2, 3])),
            "wrong shape (2-D)": wrong(lambda tf: tf.constant([["a", "b"], ["c", "d"]])),
            "a batch of 10,000 rows": strings(["a fine film , said the critic ."] * 10_000)}


def telling_line(message: str) -> str:
    """An error's first line that says something (TensorFlow's start with "Graph execution error:")."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    noise = ("Graph execution error", "Detected at node", "<stack traces unavailable>", "File ")
    return next((line for line in lines if not line.startswith(noise)), lines[0] if lines else "")[:160]


def call_within(function: Callable[[], object], timeout: float) -> tuple[str, float]:
    """('answered'|'error: ...'|'no answer within T s', seconds) of `function()` run on a thread."""
    outcome: list[str] = []

    def target() -> None:
        try:
            function()
            outcome.append("answered")
        except Exception as e:  # noqa: BLE001  (an error for the request is the wanted outcome)
            outcome.append(f"error: {type(e).__name__}: {telling_line(str(e))}")

    start = time.perf_counter()
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    return (outcome[0] if outcome else f"no answer within {timeout:.0f} s"), time.perf_counter() - start


def hostile(task: str, serve: Call, good: dict, timeout: float) -> list[dict]:
    """Each hostile request's outcome and seconds, and how far the next good request's answer is from before."""
    import tensorflow as tf

    reference = numeric(serve(**good))
    found = []
    for name, make in hostile_requests(task).items():
        outcome, seconds = call_within(lambda: serve(**make(tf)), timeout)
        differences: list[float] = []
        after, _ = call_within(lambda: differences.append(largest_difference(numeric(serve(**good)), reference)),
                               timeout)
        found.append({"request": name, "outcome": outcome, "seconds": seconds, "good_request_after": after,
                      "max_abs_diff_after": differences[0] if differences else float("inf")})
    return found


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.serving_soak", description=__doc__.split("\n")[0])
    p.add_argument("--task", choices=TASKS, required=True)
    p.add_argument("--saved_model", required=True, help="the task SavedModel folder (EXPORT/classifier, EXPORT/squad)")
    p.add_argument("--inputs", required=True, help="inputs.json of bench.inference_setup (short and long strings)")
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--soak_seconds", type=float, default=300)
    p.add_argument("--window_seconds", type=float, default=30)
    p.add_argument("--sweep_seconds", type=float, default=10)
    p.add_argument("--batch_sizes", default="1,8,32")
    p.add_argument("--hostile_timeout", type=float, default=300)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    import json

    with open(args.inputs, encoding="utf-8") as f:
        inputs = json.load(f)
    rows = inputs["short"] if args.task == "classifier" else list(zip(inputs["short"], inputs["long"]))
    serve, arguments = load(args.task, args.saved_model)
    loaded_mib = rss_mib()
    sizes = [int(s) for s in args.batch_sizes.split(",")]
    swept = sweep(serve, arguments, rows, sizes, args.sweep_seconds)
    soaked = soak(serve, arguments, rows, args.clients, args.soak_seconds, args.window_seconds)
    attacked = hostile(args.task, serve, arguments(rows[:4]), args.hostile_timeout)
    metrics = {"loaded_rss_mib": loaded_mib, **{k: v for k, v in soaked.items() if not isinstance(v, (list, dict))},
               "hostile_handled": sum(h["outcome"] == "answered" or h["outcome"].startswith("error: ")
                                      for h in attacked),
               "hostile_good_after_max_abs_diff": max(h["max_abs_diff_after"] for h in attacked),
               **{f"b{s['batch_size']}_items_per_s": s["items_per_s"] for s in swept}}
    details = {"task": args.task, "clients": args.clients, "bert_tf_imported": "bert_tf" in sys.modules,
               "sweep": swept, "windows": soaked["windows"], "first_errors": soaked["first_errors"],
               "rss_every_10s_mib": soaked["rss_every_10s_mib"], "hostile": attacked}
    report(args.out, {**metrics, **details},
           quiet=("sweep", "windows", "first_errors", "rss_every_10s_mib", "hostile"))
    sys.stdout.flush()
    os._exit(0)  # a hostile request's thread may still run (its outcome says so); nothing else is left to do


if __name__ == "__main__":
    main()
