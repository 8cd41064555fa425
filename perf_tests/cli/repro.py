"""The one command that re-measures a failed case alone, against the same baseline.

A failure line is only as good as the next five minutes of the person who reads it, so every
line that fails a case ends with the command that reproduces it, and results.json keeps it in
the case's row (`repro`):

    repro: python3 -m pytest \
        'perf_tests/test_resnet50_training.py::test_training_throughput[1n1g_fp32_b8]' \
        --perf-baseline-file baselines/cpu-amd-epyc.json --perf-set threads=1

It is built from the session's own command line (`PYTEST_ADDOPTS` included; the ini file's
`addopts` apply again by themselves): its test id (that case and no other; a multi-device case
whose speedup was taken over this session's 1n1g case runs that one first, so the speedup is
taken over the same kind of figure), the baseline file it was judged against (named wherever it
exists, so a later change of host or default cannot change it), and every option of the suite's
table that shapes a measurement, as it was typed (`SHAPING`: the runs, the profile, the
workload, the launcher, the candidate stack, the verdict's strictness...).

Options that only say where results go (or that would write the baseline again) are left out,
except where the failure is a recording that was not written (refused by the checks, or the file
unwritable): then the command redoes the recording, `--perf-update-baselines` (or its `=force`)
as typed, into the baseline file the session named, whether it exists yet or not. Paths are made
relative to the repository root, where the command runs (a `cd` first when the session ran
elsewhere). The environment variables that shape a run and differed from the baseline's go
first, as `env` sets or unsets them (perf_tests/runs/variables.py), so that a slowdown a
variable made reproduces in a fresh shell too:

    repro: env DNNL_MAX_CPU_ISA=SSE41 python3 -m pytest '...[1n1g_fp32_b8]' --perf-baseline-file ...
"""
from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from perf_tests.cli.option import Option
from perf_tests.cli.options import KEYS, OPTIONS, SET

# Options that do not shape what is measured or how it is judged: where the results go, the
# baseline file (named explicitly), and writing it.
NOT_REPEATED = ("baseline_file", "results", "update_baselines", "exports")
SHAPING = tuple(option for option in OPTIONS if option.field not in NOT_REPEATED)
# ... and those a command that redoes a recording repeats too.
RECORDING = tuple(option for option in OPTIONS if option.field not in NOT_REPEATED
                  or option.field == "update_baselines")
BASELINE_FILE = next(option.flag for option in OPTIONS if option.field == "baseline_file")
PATH_FIELDS = ("data_dir", "hostfile", "candidate_python", "image", "candidate_image")
# ... an image only where it names a file or folder (else a name in a runtime's store)
IMAGE_FIELDS = ("image", "candidate_image")
INTERPRETER = "candidate_python"   # a path where it has a /, else a name looked up on PATH


@dataclass(frozen=True)
class CommandLine:
    """The session's command line as typed (`PYTEST_ADDOPTS`, then pytest's
    `invocation_params`) and where."""
    args: tuple[str, ...]
    directory: Path

    @classmethod
    def of(cls, invocation_args, directory: Path) -> "CommandLine":
        added = shlex.split(os.environ.get("PYTEST_ADDOPTS", ""))
        return cls((*added, *map(str, invocation_args)), Path(directory))


def typed_values(args: tuple[str, ...],
                 options: tuple[Option, ...] = SHAPING) -> dict[str, object]:
    """{setting: the text typed for it} for the suite's `options` in `args`, each `--perf-set`
    KEY=VALUE under its key's setting (a flag without a value: True, or the form typed; a
    repeatable one: the list); pytest's own arguments are passed over."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    for option in options:   # as registered, but every value kept as its text
        option.add_to(lambda *flags, action=None, dest=option.field or option.dest, **_:
                      parser.add_argument(*flags, dest=dest, default=None,
                                          action=action or "store"))
    known, _ = parser.parse_known_args(list(args))
    typed = {field: value for field, value in vars(known).items() if value is not None}
    for setting in typed.pop(SET.dest, None) or ():
        name, _, value = setting.partition("=")
        if name in KEYS:
            typed[KEYS[name].field] = value
    return typed


def option_arguments(option: Option, typed, place) -> list[str]:
    if typed is True:
        return [option.flag]
    if f"{option.flag}={typed}" in option.forms:
        return [f"{option.flag}={typed}"]
    if option.field in PATH_FIELDS and (option.field != INTERPRETER or os.sep in str(typed)):
        typed = place(typed, option.field)
    return [part for value in (typed if isinstance(typed, list) else [typed])
            for part in (option.flag, str(value))]


def python_command() -> str:
    """`python3` where that is this interpreter (on PATH from the same folder: a virtual
    environment's python3 and its base interpreter's resolve to the same file, but only the
    first has its packages), else this interpreter's path."""
    found = shutil.which("python3")
    ours = Path(sys.executable).absolute()
    if found and Path(found).absolute().parent == ours.parent and \
            Path(found).resolve() == ours.resolve():
        return "python3"
    return sys.executable


def repro_command(command_line: CommandLine, rootdir: Path, node_ids: list[str],
                  baseline_file: Path | None, env_words: Sequence[str] = (),
                  recording: bool = False) -> str:
    """The shell command that measures the tests `node_ids` (the failed case's, after the one
    its figures were taken over, if any) with the options that shaped them, against
    `baseline_file` (None: judged without one, as A/B is, or a file that does not exist),
    behind `env_words` (`env -u K K=V`: the variables that differed from the baseline's);
    `recording`: recording them into `baseline_file` again, as the session tried to."""
    def place(path, field: str = "") -> str:
        """A path as typed, from the repository root: relative inside it, else absolute (an
        image's name as typed where it is not a path here)."""
        typed_path = command_line.directory / Path(str(path)).expanduser()
        # An interpreter's link is kept, not followed: a virtual environment's python is a link
        # to its base interpreter, and only the link's own path selects the venv's packages.
        resolved = Path(os.path.abspath(typed_path)) if field == INTERPRETER \
            else typed_path.resolve()
        if field in IMAGE_FIELDS and not resolved.exists():
            return str(path)
        try:
            return str(resolved.relative_to(rootdir.resolve()))
        except ValueError:
            return str(resolved)

    options = RECORDING if recording else SHAPING
    typed = typed_values(command_line.args, options)
    words = [*env_words, python_command(), "-m", "pytest", *node_ids]
    if baseline_file is not None:
        words += [BASELINE_FILE, place(baseline_file)]
    for option in options:
        if option is SET:
            words += [word for key in KEYS.values() if key.field in typed
                      for word in (SET.flag, f"{key.flag}={typed[key.field]}")]
        elif option.field in typed:
            words += option_arguments(option, typed[option.field], place)
    command = shlex.join(words)
    if command_line.directory.resolve() != rootdir.resolve():
        command = f"cd {shlex.quote(str(rootdir))} && {command}"
    return command
