# Ridgeline: the two README commands are `make app` and `make test`.
PYTHON ?= python3
PORT ?= 8501

.PHONY: install install-dev app test lint bench browser accuracy

install:
	$(PYTHON) -m pip install -q -r requirements.txt

install-dev:
	$(PYTHON) -m pip install -q -r requirements-dev.txt

app: install
	$(PYTHON) -m streamlit run app.py --server.port $(PORT) --server.headless true

# Every test, the real-browser ones included (needs Debian's chromium: .ci/run installs it).
test: install-dev
	$(PYTHON) -m ruff check .
	$(PYTHON) -m pytest

lint:
	$(PYTHON) -m ruff check .

bench: install-dev
	$(PYTHON) -m pytest benchmarks --benchmark-enable --benchmark-only -q
	$(PYTHON) tools/bench_app.py

accuracy:
	$(PYTHON) tools/accuracy_report.py
