"""A user's `pip install .`: the wheel, installed in a fresh venv, gives every program, the fused kernels'
source and the native tokenizer, from any directory; a clone's scripts say when they shadow a better build.

Nothing is downloaded: the fresh venv sees the project venv's dependencies through a .pth line (a plain path
line, which does not run the project venv's own .pth files, so its editable bert_tf stays out).
"""
import pathlib
import re
import os
import shutil
import site
import subprocess
import sys
import sysconfig

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONSOLE_SCRIPTS = ["bert-tf-pretrain", "bert-tf-create-pretraining-data", "bert-tf-beam-create-pretraining-data",
                   "bert-tf-prepare-corpus", "bert-tf-create-vocab", "bert-tf-extract-features", "bert-tf-convert",
                   "bert-tf-squad-evaluate", "bert-tf-build-kernels", "bert-tf-classifier",
                   "bert-tf-squad", "bert-tf-ner", "bert-tf-conlleval", "bert-tf-export", "bert-tf-swag",
                   "bert-tf-make-multiple-choice"]


def _check(args, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run(args, capture_output=True, text=True, timeout=300, **kwargs)
    assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-2000:])
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(venv bin folder, environment, a cwd outside the clone) with the wheel of this tree installed."""
    tmp = tmp_path_factory.mktemp("install")
    build = tmp / "src"
    shutil.copytree(ROOT, build, ignore=shutil.ignore_patterns(".git", ".venv", "build", "*.egg-info", "*.so",
                                                               "__pycache__", "demo_output", "tests"))
    _check([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(tmp / "dist"),
            str(build)])
    wheel = next((tmp / "dist").glob("bert_tf-*.whl"))
    venv = tmp / "venv"
    _check([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    purelib = _check([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    deps = [sysconfig.get_paths()["purelib"], *site.getsitepackages()]
    with open(os.path.join(purelib, "project_dependencies.pth"), "w") as f:
        f.write("\n".join(dict.fromkeys(deps)) + "\n")
    _check([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", str(wheel)])
    cwd = tmp / "elsewhere"
    cwd.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(BERT_TF_CACHE=str(tmp / "cache"), PATH=f"{venv / 'bin'}:{env['PATH']}")
    return venv / "bin", env, cwd


@pytest.mark.slow
def test_every_console_script_answers_help_from_any_directory(installed):
    bin_dir, env, cwd = installed
    declared = re.findall(r'"(bert-tf-[a-z-]+)=', pathlib.Path(ROOT, "setup.py").read_text(encoding="utf-8"))
    assert sorted(declared) == sorted(CONSOLE_SCRIPTS)  # every script setup.py installs is tried here
    for name in CONSOLE_SCRIPTS:
        done = subprocess.run([str(bin_dir / name), "--help"], capture_output=True, text=True, timeout=120,
                              cwd=cwd, env=env)
        assert "--" in done.stdout and "Traceback" not in done.stderr, (name, done.stdout[-500:], done.stderr[-1000:])
    done = _check([str(bin_dir / "python"), "-m", "bert_tf.tasks.squad.evaluate", "--help"], cwd=cwd, env=env)
    assert "--na-prob-file" in done.stdout


@pytest.mark.slow
def test_the_installed_build_is_imported_with_its_native_tokenizer(installed):
    bin_dir, env, cwd = installed
    done = _check([str(bin_dir / "python"), "-c", "import bert_tf; from bert_tf.text import native_wordpiece; "
                   "print(bert_tf.__file__, native_wordpiece.available())"], cwd=cwd, env=env)
    path, available = done.stdout.split()
    assert str(bin_dir.parent) in path and ROOT not in path and available == "True"


@pytest.mark.slow
def test_the_fused_kernels_compile_from_the_wheel_source(installed):
    bin_dir, env, cwd = installed
    done = _check([str(bin_dir / "bert-tf-build-kernels")], cwd=cwd, env=env)
    library = done.stdout.strip().splitlines()[-1]
    assert library.startswith(env["BERT_TF_CACHE"]) and os.path.isfile(library)


@pytest.mark.slow
def test_the_installed_pretrain_reads_a_shipped_flagfile_from_another_directory(installed):
    bin_dir, env, cwd = installed
    done = subprocess.run([str(bin_dir / "bert-tf-pretrain"), f"--flagfile={ROOT}/configs/bert_tiny_phase1.flags",
                           "--input_file=missing-*.tfrecord", "--output_dir=out"],
                          capture_output=True, text=True, timeout=120, cwd=cwd, env=env)
    # the config file named in the flagfile was found and read; the records were looked for next
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "bert-tf-pretrain: error: --input_file: 'missing-*.tfrecord' matches no file"], done.stderr


@pytest.mark.slow
def test_a_clone_without_the_native_tokenizer_warns_that_it_shadows_the_installed_one(installed, tmp_path):
    bin_dir, env, _ = installed
    clone = tmp_path / "clone"
    shutil.copytree(ROOT, clone, ignore=shutil.ignore_patterns(".git", ".venv", "build", "*.so", "__pycache__",
                                                               "tests", "demo_output", "docs", "bench"))
    done = subprocess.run([str(bin_dir / "python"), str(clone / "data_prep" / "create_vocab.py"), "--help"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert f"create_vocab.py: warning: running the source tree {clone}, whose native tokenizer is not built" \
        in done.stderr, done.stderr
