"""The argument parser the tools share: a usage error is one line and exit status 2; every tool's
usage and error lines name it as a user runs it (`python3 -m tools.report`)."""
from __future__ import annotations

import argparse
from pathlib import Path


def tool_command(module_file: str) -> str:
    """`python3 -m tools.report` for tools/report.py: how every tool names itself in its usage
    line and its error lines (its console script, rn50-perf-report, runs the same)."""
    return f"python3 -m tools.{Path(module_file).stem}"


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")
