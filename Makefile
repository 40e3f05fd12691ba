# Ridgeline: the two README commands are `make app` and `make test`.
#
# Everything installs into the project's own virtual environment (.venv): pip never touches the
# system Python, so this works on Debian/Ubuntu's externally managed Python (PEP 668) and wherever
# pip refuses to install outside a virtual environment. PYTHON only creates the environment.
PYTHON ?= python3
VENV ?= .venv
PORT ?= 8501
PY := $(VENV)/bin/python

.PHONY: venv install install-dev bytecode browser-deps nginx-deps app team loadtest test lint bench calibrate accuracy

# The environment itself. Debian ships `venv` without ensurepip unless python3-venv is installed:
# as root with apt-get we install it, otherwise we say what to install.
$(PY):
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { \
	  echo "error: Ridgeline needs Python 3.11 or newer ('$(PYTHON)' is $$($(PYTHON) --version 2>&1)); run: make PYTHON=python3.11 ..." >&2; exit 1; }
	@$(PYTHON) -c 'import ensurepip, venv' 2>/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "Installing python3-venv (Debian's venv needs it) ..."; \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null; } || { \
	      echo "error: could not install python3-venv with apt-get; install it, then run make again" >&2; exit 1; }; \
	  else \
	    echo "error: '$(PYTHON)' cannot create a virtual environment (no ensurepip): sudo apt-get install python3-venv, then run make again" >&2; exit 1; \
	  fi; }
	@rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV)

venv: $(PY)

# Stamps: reinstall only when a requirements file changes.
$(VENV)/.installed: requirements.txt | $(PY)
	$(PY) -m pip install -q -r requirements.txt
	@touch $@

$(VENV)/.installed-dev: requirements.txt requirements-dev.txt | $(PY)
	$(PY) -m pip install -q -r requirements-dev.txt
	@touch $@ $(VENV)/.installed

install: $(VENV)/.installed

install-dev: $(VENV)/.installed-dev

# Bytecode of the project's own modules, written once here: where the environment sets
# PYTHONDONTWRITEBYTECODE, each command (and each app search, a child process) would otherwise compile the
# planner's sources again, ~0.05 s of CPU (issue 31). compileall skips the files already up to date.
bytecode: install
	@$(PY) -m compileall -q planner gpu_catalog ui >/dev/null

app: install bytecode
	@echo "Ridgeline: open http://localhost:$(PORT) (on a remote server, its address on port $(PORT)); Ctrl-C stops it."
	$(PY) -m streamlit run app.py --server.port $(PORT) --server.headless true

# A team on one host: WORKERS Streamlit processes behind Debian's nginx on PORT (tools/team.py; Ctrl-C stops all).
WORKERS ?= 2
team: install nginx-deps
	$(PY) tools/team.py --workers $(WORKERS) --port $(PORT)

# Real websocket sessions against a team of WORKERS started on a free loopback port (tools/load_team.py).
loadtest: install-dev nginx-deps
	$(PY) tools/load_team.py --workers $(WORKERS)

# Debian's nginx for `make team`, installed only when root and missing (no system config is touched);
# it says so before apt-get runs.
nginx-deps:
	@command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "make team: nginx is missing; installing Debian's nginx package with apt-get (apt-get update, then apt-get install nginx; docs/TEAM.md) ..."; \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null; } || { \
	      echo "error: could not install nginx with apt-get; install it (apt-get install nginx), then run make again" >&2; exit 1; }; \
	    echo "make team: installed $$(nginx -v 2>&1 || /usr/sbin/nginx -v 2>&1)"; \
	  else echo "error: nginx is missing: sudo apt-get install nginx, then run make again" >&2; exit 1; fi; }

# Debian's chromium for the real-browser tests (Playwright's own browser download cannot work here).
browser-deps:
	@command -v chromium >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# Every test, the real-browser ones included.
test: install-dev browser-deps bytecode
	$(PY) -m ruff check .
	$(PY) -m mypy planner
	$(PY) -m pytest

lint: install-dev
	$(PY) -m ruff check .

bench: install-dev
	$(PY) -m pytest benchmarks --benchmark-enable --benchmark-only -q
	$(PY) tools/bench_app.py

# Refit the engine profiles (graph physics on our measurements, engines on public rows) and the error bands, then docs/ACCURACY.md.
calibrate: install-dev
	$(PY) tools/fit_engines.py

accuracy: install-dev
	$(PY) tools/accuracy_report.py
