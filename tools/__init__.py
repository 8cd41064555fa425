"""The suite's tools, the verbs of one command, `rn50-perf` (command.py; `python3 -m tools VERB` in
a checkout): a package a tool of several modules (bisect, calibrate, gpu, history, report, bench), a
module one of one; cli.py, inputs.py and worker_runs.py are what they share. A tool may import
anything of perf_tests and rn50_model; nothing there imports a tool.

A tool typed as before the one command (`python3 -m tools.gpu_check --measure`) stops with one
line naming its verb, as an option from before the `--perf-` prefix does: `MovedTools`."""
from __future__ import annotations

import importlib.abc
import sys

# Each tool's module from before the one command, and its verb now.
MOVED = {"gpu_check": "gpu-check", "gpu_bench": "gpu-bench", "gpu_measure": "gpu-check",
         "bisect_stack": "bisect", "calibrate": "calibrate", "report": "report",
         "history": "history", "publish": "publish", "promote_baseline": "promote",
         "extract_logs": "extract-logs", "host_load": "host-load",
         "install_optional": "install-optional", "options_doc": "options-doc",
         "bench_harness": "bench-harness", "bench_image": "bench-image",
         "bench_probe": "bench-probe", "bench_publish": "bench-publish"}


def moved_line(module: str) -> str:
    verb = MOVED[module]
    return (f"python3 -m tools.{module} is now a verb of one command: rn50-perf {verb} "
            f"(python3 -m tools {verb} in a checkout)")


class MovedTools(importlib.abc.MetaPathFinder):
    """Asked last, for what no other finder found: `tools.gpu_check`, or `tools.calibrate.__main__`
    (a tool that became a package), stops with `moved_line`."""

    def find_spec(self, name, path=None, target=None):
        package, _, rest = name.partition(".")
        module = rest.removesuffix(".__main__")
        if package == __name__ and module in MOVED:
            raise SystemExit(moved_line(module))
        return None


if not any(isinstance(finder, MovedTools) for finder in sys.meta_path):
    sys.meta_path.append(MovedTools())
