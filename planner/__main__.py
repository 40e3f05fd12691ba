import sys

from planner.contract.cli import main

sys.exit(main())
