import gc
import sys

from planner.contract.cli import main

# One command per process: what the imports built lives until exit, so the collector need not walk it again
# (gc.freeze), and a sizing request makes hundreds of thousands of short-lived objects and few cycles, so the
# young generation is collected less often (mypy's setting for the same reason). Issue 9's request: 1.87 s
# wall before, 1.56-1.67 s after (benchmarks/test_bench_modes.py).
gc.freeze()
gc.set_threshold(100_000, 50, 100)
sys.exit(main())
