import os
import sys

# One BLAS thread, set before numpy loads (only where the user has not chosen): a plan's arrays are small,
# and OpenBLAS starting a thread pool per core costs ~0.10 s of CPU per process for nothing (issue 32).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

# One command per process: the collector settings of planner.core.one_request (issue 9's request: 1.87 s
# wall before, 1.56-1.67 s after, benchmarks/test_bench_modes.py).
from planner.core.one_request import collect_rarely, freeze_imports  # noqa: E402

collect_rarely()

from planner.contract.cli import main  # noqa: E402  (after the BLAS and collector settings)

freeze_imports()
sys.exit(main())
