"""The one command that re-measures a failed case alone, against the same baseline.

A failure line is only as good as the next five minutes of the person who reads it, so every
line that fails a case ends with the command that reproduces it, and results.json keeps it in
the case's row (`repro`):

    repro: python3 -m pytest 'perf_tests/test_resnet50_training.py::test_training_throughput[1n1g_fp32_b8]' --baseline-file baselines/cpu-amd-epyc.json --perf-threads 1

It is built from the session's own command line: its test id (that case and no other), the
baseline file it was judged against (always named, so a later change of host or default cannot
change it), and every option of the suite's table that shapes a measurement as it was typed
(`SHAPING`: the runs, the profile, the workload, the launcher, the candidate stack, the
verdict's strictness...). Options that only say where results go (or that would write the
baseline again) are left out. Paths are made relative to the repository root, where the command
runs (a `cd` first when the session ran elsewhere).
"""
from __future__ import annotations

import argparse
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from .options import OPTIONS, Option

# Options that do not shape what is measured or how it is judged: where the results go, the
# baseline file (named explicitly), and writing it.
NOT_REPEATED = ("baseline_file", "results", "update_baselines", "force_baselines",
                "benchmark_json", "exports")
SHAPING = tuple(option for option in OPTIONS if option.field not in NOT_REPEATED)
PATH_FIELDS = ("data_dir", "hostfile")


@dataclass(frozen=True)
class CommandLine:
    """The session's command line as typed (pytest's `invocation_params`) and where."""
    args: tuple[str, ...]
    directory: Path


def typed_values(args: tuple[str, ...]) -> dict[str, object]:
    """{setting: the text typed for it} for the suite's options in `args` (a flag without a
    value: True; a repeatable one: the list); pytest's own arguments are passed over."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    for option in SHAPING:
        keywords = {"action": "store_true"} if option.action == "store_true" else \
            {"action": "append"} if option.action == "append" else {}
        parser.add_argument(option.flag, dest=option.field, default=None, **keywords)
    known, _ = parser.parse_known_args(list(args))
    return {field: value for field, value in vars(known).items() if value is not None}


def option_arguments(option: Option, typed, place) -> list[str]:
    if typed is True:
        return [option.flag]
    if option.field in PATH_FIELDS:
        typed = place(typed)
    return [part for value in (typed if isinstance(typed, list) else [typed])
            for part in (option.flag, str(value))]


def python_command() -> str:
    """`python3` where that is this interpreter, else this interpreter's path."""
    found = shutil.which("python3")
    if found and Path(found).resolve() == Path(sys.executable).resolve():
        return "python3"
    return sys.executable


def repro_command(command_line: CommandLine, rootdir: Path, node_id: str,
                  baseline_file: Path | None) -> str:
    """The shell command that measures the test `node_id` alone with the options that shaped
    it, against `baseline_file` (None: a mode judged without one, A/B)."""
    def place(path) -> str:
        """A path as typed, from the repository root: relative inside it, else absolute."""
        resolved = (command_line.directory / Path(str(path)).expanduser()).resolve()
        try:
            return str(resolved.relative_to(rootdir.resolve()))
        except ValueError:
            return str(resolved)

    typed = typed_values(command_line.args)
    words = [python_command(), "-m", "pytest", node_id]
    if baseline_file is not None:
        words += ["--baseline-file", place(baseline_file)]
    for option in SHAPING:
        if option.field in typed:
            words += option_arguments(option, typed[option.field], place)
    command = shlex.join(words)
    if command_line.directory.resolve() != rootdir.resolve():
        command = f"cd {shlex.quote(str(rootdir))} && {command}"
    return command
