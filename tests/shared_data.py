"""The one place tests find the shared data folder (`$BERT_TF_SHARED` or `../shared`)."""
from __future__ import annotations

import os
import pathlib

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent


def shared_root() -> pathlib.Path | None:
    env = os.environ.get("BERT_TF_SHARED")
    root = pathlib.Path(env) if env else REPO_ROOT.parent / "shared"
    return root if (root / "README.md").is_file() else None


def shared_path(*parts: str) -> pathlib.Path:
    """Path under the shared folder's `data/`; skips the test (fails under CI) when absent."""
    root = shared_root()
    if root is None:
        reason = ("shared data folder not found: set BERT_TF_SHARED or place it at ../shared "
                  "beside the repository")
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason + " (CI=true: absence is a failure)")
        pytest.skip(reason)
    path = root.joinpath("data", *parts)
    if not path.exists():
        pytest.fail(f"shared data file missing: {path}")
    return path
