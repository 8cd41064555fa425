"""Parsers for the suite's command-line values: each rejects a bad value with a message that says
what is wanted, so pytest reports a usage error naming the option instead of a traceback."""
from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
from collections.abc import Callable
from pathlib import Path

from perf_tests.baselines.file import AUTO
from perf_tests.core.cases import SWEEP_BATCHES, Case, CaseIdError
from perf_tests.report.exports import EXPORT_FORMATS
from rn50_model.config import PRECISIONS

SIZE_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def whole_number(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum or (maximum is not None and value > maximum):
            upper = f" and at most {maximum}" if maximum is not None else ""
            raise argparse.ArgumentTypeError(f"{value} must be at least {minimum}{upper}")
        return value
    parse.__name__ = "whole number"
    return parse


def number(text: str, unit: str = "") -> float:
    """`text` as a number; ArgumentTypeError naming it where it is none (`'x' is not a number of
    seconds`)."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number{unit}") from None


def seconds(text: str) -> float:
    value = number(text, " of seconds")
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} must be more than 0 seconds")
    return value


def fraction(text: str) -> float:
    value = number(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text} must be a fraction between 0 and 1, "
                                         "e.g. 0.05 for 5%")
    return value


def tolerance(text: str) -> float | str:
    """--perf-tolerance: a fraction, or `auto` (a band from the runs' noise: tolerance_band.py)."""
    if text.strip().lower() == AUTO:
        return AUTO
    try:
        return fraction(text)
    except argparse.ArgumentTypeError as error:
        raise argparse.ArgumentTypeError(f"{error}, or auto for a band from the runs' "
                                         "noise") from None


NO_HISTORY = "none"


def history_folders(text: str) -> tuple[Path, ...] | tuple[str]:
    """--perf-set history: folders (a session's, or one of sessions), comma-separated, or
    `none`."""
    if text.strip().lower() == NO_HISTORY:
        return (NO_HISTORY,)
    folders = tuple(Path(part.strip()) for part in text.split(",") if part.strip())
    missing = [str(folder) for folder in folders if not folder.is_dir()]
    if not folders or missing:
        raise argparse.ArgumentTypeError(f"{', '.join(missing) or repr(text)} is not a folder; "
                                         "pass folders of earlier sessions (perf_results/), "
                                         f"or {NO_HISTORY}")
    return folders


def top1(text: str) -> float:
    """A top-1 accuracy as a fraction: above 0, at most 1."""
    value = number(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text} must be a top-1 fraction above 0 and at most "
                                         "1, e.g. 0.759 for 75.9%")
    return value


SWITCH_WORDS = {"on": True, "off": False, "true": True, "false": False, "yes": True, "no": False,
                "1": True, "0": False}


def switch(text: str) -> bool:
    """A setting that is on or off (a `--perf-set` key such as compile=on)."""
    try:
        return SWITCH_WORDS[text.strip().lower()]
    except KeyError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither on nor off (on/off, true/false, "
                                         "yes/no, 1/0)") from None


def one_of(choices: tuple[str, ...]) -> Callable[[str], str]:
    """A word from `choices`, as an option's `choices=` checks it (for a `--perf-set` key)."""
    def parse(text: str) -> str:
        if text not in choices:
            raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(choices)}")
        return text
    parse.__name__ = "choice"
    return parse


def precision_list(text: str) -> tuple[str, ...]:
    values = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    unknown = [value for value in values if value not in PRECISIONS]
    if not values or unknown:
        raise argparse.ArgumentTypeError(f"{text!r}: precisions are a comma list of "
                                         f"{', '.join(PRECISIONS)}")
    return values


def batch_list(text: str) -> tuple[int, ...]:
    if text.strip() == "sweep":
        return SWEEP_BATCHES
    try:
        values = tuple(dict.fromkeys(int(part) for part in text.split(",") if part.strip()))
    except ValueError:
        values = ()
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(
            f"{text!r}: batches are a comma list of whole numbers, or 'sweep' for "
            f"{','.join(map(str, SWEEP_BATCHES))}")
    return values


def case_id(text: str) -> Case:
    try:
        return Case.parse(text)
    except CaseIdError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def byte_size(text: str) -> int:
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*", text, re.IGNORECASE)
    if not match or float(match[1]) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size; use e.g. 512M or 40G")
    return int(float(match[1]) * SIZE_UNITS[match[2].upper()])


def output_file(text: str) -> Path:
    """A file the session writes at its end: not empty, not an existing folder."""
    path = Path(text)
    if not text.strip() or path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a folder or empty; pass a file path, "
                                         "e.g. benchmark.json")
    return path


def export_target(text: str) -> tuple[str, Path]:
    """FORMAT=PATH for --perf-export, FORMAT one of the exporters' names."""
    format_name, equals, path = text.partition("=")
    if not equals or format_name not in EXPORT_FORMATS:
        raise argparse.ArgumentTypeError(
            f"{text!r}: use FORMAT=PATH with FORMAT one of {', '.join(EXPORT_FORMATS)}, "
            "e.g. bencher=bencher.json")
    return format_name, output_file(path)


def interpreter(text: str) -> str:
    """--perf-candidate-python: an executable file, kept as given (a venv's python is a link
    whose own path selects the venv)."""
    path = shutil.which(text) if os.sep not in text else text
    if not path or not os.path.isfile(path) or not os.access(path, os.X_OK):
        raise argparse.ArgumentTypeError(f"{text!r} is not an executable file; pass the "
                                         "candidate environment's python, e.g. "
                                         "/opt/new-env/bin/python")
    return os.path.abspath(path)


def command_prefix(text: str) -> tuple[str, ...]:
    """--perf-candidate-prefix: a command line whose first word is a program on PATH."""
    try:
        words = tuple(shlex.split(text))
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"{text!r} does not parse as a command ({error})") \
            from None
    if not words:
        raise argparse.ArgumentTypeError("the prefix is empty; pass a command such as "
                                         "'apptainer exec --nv new.sif'")
    if shutil.which(words[0]) is None:
        raise argparse.ArgumentTypeError(f"{words[0]!r} (the first word of {text!r}) is not a "
                                         "program on PATH")
    return words


def env_setting(text: str) -> tuple[str, str]:
    """--perf-candidate-env: KEY=VALUE."""
    key, equals, value = text.partition("=")
    if not equals or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
        raise argparse.ArgumentTypeError(f"{text!r}: use KEY=VALUE, e.g. NCCL_ALGO=Ring")
    return key, value
