"""Serving an exported task SavedModel under load and hostile requests (bench/serving_soak.py, the soak study's
host), briefly, for the export tests."""
import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
HOSTILE = ("empty strings", "a 1 MB string", "invalid UTF-8", "wrong dtype (int32)", "wrong shape (2-D)",
           "a batch of 10,000 rows")


def serve_briefly(task: str, folder: pathlib.Path, short: list[str], long: list[str], tmp: pathlib.Path) -> dict:
    """bench.serving_soak's result for `folder` with 2 clients for 3 s; the host process must end with status 0."""
    (tmp / "inputs.json").write_text(json.dumps({"short": short, "long": long}), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "bench.serving_soak", f"--task={task}", f"--saved_model={folder}",
                           f"--inputs={tmp / 'inputs.json'}", "--clients=2", "--soak_seconds=3",
                           "--window_seconds=1", "--sweep_seconds=0.2", "--batch_sizes=1,8", "--hostile_timeout=120",
                           f"--out={tmp / 'soak'}"], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return json.loads((tmp / "soak" / "result.json").read_text(encoding="utf-8"))


def assert_each_hostile_request_gets_its_own_answer_or_error(result: dict) -> None:
    """Every hostile request ended in an answer or an error within the timeout; the good request after each got
    the answer it got before them; the good requests under load never failed; bert_tf was never imported."""
    outcomes = {h["request"]: h for h in result["hostile"]}
    assert tuple(outcomes) == HOSTILE
    for name, h in outcomes.items():
        assert h["outcome"] == "answered" or h["outcome"].startswith("error: "), (name, h)
        assert h["good_request_after"] == "answered" and h["max_abs_diff_after"] <= 1e-6, (name, h)
    for name in ("wrong dtype (int32)", "wrong shape (2-D)"):
        assert outcomes[name]["outcome"].startswith("error: "), outcomes[name]
    for name in ("empty strings", "a 1 MB string", "a batch of 10,000 rows"):
        assert outcomes[name]["outcome"] == "answered", outcomes[name]
    assert result["hostile_handled"] == len(HOSTILE)
    assert result["requests"] > 0 and result["errors"] == 0, result["first_errors"]
    assert result["bert_tf_imported"] is False
