"""What the tools share: the argument parser whose usage error is one line and exit status 2, and
the folder that holds the suite's packages (a checkout, or site-packages where it is installed)."""
from __future__ import annotations

import argparse
from pathlib import Path

# The folder holding perf_tests/, rn50_model/ and tools/: what a tool runs the suite from.
SUITE_ROOT = Path(__file__).resolve().parent.parent


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")
