# `make test` and `make run` work on a fresh machine: they create .venv and
# install the pinned requirements the first time.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export TF_CPP_MIN_LOG_LEVEL ?= 2

.PHONY: venv test test-fast run clean-venv

venv: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -e .
	touch $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q

# Everything but the slow end-to-end runs.
test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow"

clean-venv:
	rm -rf $(VENV)
