"""`python3 -m tools VERB`: `rn50-perf VERB` in a checkout that is not installed."""
import sys

from tools.command import main

sys.exit(main())
