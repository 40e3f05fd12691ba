import gc
import os
import sys

# One BLAS thread, set before numpy loads (only where the user has not chosen): a plan's arrays are small,
# and OpenBLAS starting a thread pool per core costs ~0.10 s of CPU per process for nothing (issue 32).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

# One command per process: what the imports build lives until exit, so the collector need not walk it
# (the imports run with the young generation collected rarely, then gc.freeze), and a sizing request makes
# hundreds of thousands of short-lived objects and few cycles, so the young generation is collected less
# often (mypy's setting for the same reason). Issue 9's request: 1.87 s wall before, 1.56-1.67 s after
# (benchmarks/test_bench_modes.py). At 100,000 the young generation was still collected 6-7 times over that
# request, walking the memo's live figures each time (~30 ms of CPU, 2,748 objects freed); at 250,000 its
# collections take under 1 ms in all and the peak memory is the same (106 MB; issue 31).
gc.set_threshold(250_000, 50, 100)

from planner.contract.cli import main  # noqa: E402  (after the BLAS and collector settings)

gc.freeze()
sys.exit(main())
