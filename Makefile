# Ridgeline: the two README commands are `make app` and `make test`.
PYTHON ?= python3
PORT ?= 8501

.PHONY: install install-dev browser-deps app test lint bench accuracy

install:
	$(PYTHON) -m pip install -q -r requirements.txt

install-dev:
	$(PYTHON) -m pip install -q -r requirements-dev.txt

app: install
	$(PYTHON) -m streamlit run app.py --server.port $(PORT) --server.headless true

# Debian's chromium for the real-browser tests (Playwright's own browser download cannot work here).
browser-deps:
	@command -v chromium >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# Every test, the real-browser ones included.
test: install-dev browser-deps
	$(PYTHON) -m ruff check .
	$(PYTHON) -m pytest

lint:
	$(PYTHON) -m ruff check .

bench: install-dev
	$(PYTHON) -m pytest benchmarks --benchmark-enable --benchmark-only -q
	$(PYTHON) tools/bench_app.py

# Refit the default engine on the public rows, then regenerate docs/ACCURACY.md and the error bands.
calibrate:
	$(PYTHON) tools/fit_calibration.py --published

accuracy:
	$(PYTHON) tools/accuracy_report.py
