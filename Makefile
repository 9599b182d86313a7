# `make test` and `make run` work on a fresh machine: they create .venv and
# install the pinned requirements the first time.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export TF_CPP_MIN_LOG_LEVEL ?= 2

.PHONY: venv test test-slow test-system run clean-venv

DIGITS_DIR := data/digits
RUN_DIR := train_dir/digits_lenet

venv: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -e .
	touch $(STAMP)

# Two pytest workers: the tests wait on processes, servers and timeouts
# often enough for a second worker to fill the cores. Tests that use
# 127.0.0.1 share one worker (the `loopback` xdist group).
PYTEST := $(PY) -m pytest -q -n 2 --dist loadgroup

# The tier to run before every commit (docs/testing.md): unit tests and
# small integration runs (a few training steps, a cluster of two tasks, a
# LeNet export), every module touched; at most 10 minutes here.
test: $(STAMP)
	$(PYTEST) -m "not slow" --durations=20

# The long end-to-end runs (accuracy after hundreds of steps, SIGKILL and
# restart cycles, the large networks trained): CI runs them after `make test`.
test-slow: $(STAMP)
	$(PYTEST) -m slow --durations=20

# The tests that need root and system services (tests/system): installs
# what they need from Debian's packages, then runs them one at a time (they
# start daemons and create network namespaces of their own, and remove
# them afterwards). `make test` needs none of this.
test-system: $(STAMP)
	bash tests/system/install.sh
	$(PY) -m pytest -q --durations=10 --system tests/system

# The main job: LeNet on the embedded digits dataset, 2 CPU clones, then the
# test-split accuracy. A fresh run each time (RUN_DIR is this target's own).
run: $(STAMP)
	$(PY) download_and_convert_data.py --dataset_name=digits \
	    --dataset_dir=$(DIGITS_DIR)
	rm -rf $(RUN_DIR)
	$(PY) train_image_classifier.py --dataset_name=digits \
	    --dataset_dir=$(DIGITS_DIR) --model_name=lenet --num_clones=2 \
	    --clone_on_cpu --batch_size=32 --optimizer=adam --opt_epsilon=1e-8 \
	    --learning_rate=0.001 --learning_rate_decay_type=fixed \
	    --max_number_of_steps=800 --log_every_n_steps=100 \
	    --train_dir=$(RUN_DIR)
	$(PY) eval_image_classifier.py --dataset_name=digits \
	    --dataset_dir=$(DIGITS_DIR) --dataset_split_name=test \
	    --model_name=lenet --checkpoint_path=$(RUN_DIR) \
	    --eval_dir=$(RUN_DIR)/eval

clean-venv:
	rm -rf $(VENV)

# TensorBoard on the summaries of `make run` (training, and eval/ beside it):
# open http://127.0.0.1:6006 while it runs; Ctrl-C stops it. The same as
# `.venv/bin/tensorboard --logdir $(RUN_DIR) --host 127.0.0.1`, less the
# start-up noise: TensorFlow imported through tf2_compat.quiet, and the
# Python event loader (ample for one run) instead of the data server's NOTE.
.PHONY: tensorboard
tensorboard: $(STAMP)
	$(PY) -c 'from tf2_compat import quiet; quiet.import_tensorflow(); \
	    from tensorboard import main; main.run_main()' \
	    --logdir $(RUN_DIR) --host 127.0.0.1 --load_fast=false

# tf-slim 1.1.0's own test suite (the 35 *_test.py files of its wheel), each
# file run through `python -m tf2_compat.run_slim`, at low priority. 25-35
# min on 2 busy cores, so not part of `make test`. Writes the result, with
# the reason of every remaining failure, to docs/tf_slim_test_suite.md and
# exits non-zero on a failure no known cause explains.
.PHONY: tf-slim-suite
tf-slim-suite: $(STAMP)
	nice -n 10 $(PY) tests/tf_slim_suite.py --output docs/tf_slim_test_suite.md
