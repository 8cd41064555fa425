"""What one command-line option of the suite is: a row of the option table (`Option`: its flag, its
parser, its default, its help, the `Settings` attribute it fills), a group of rows (`Group`, a
`--help` section), and the action of `--perf-update-baselines[=force]`. The table itself is
perf_tests/cli/options.py."""
from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

PREFIX = "--perf-"
FORCE = "force"   # --perf-update-baselines=force: record what the checks refuse too
# The value a flag or key takes, by its parser's name where the row names no metavar or choices.
PLACEHOLDERS = {"whole number": "N", "seconds": "SECONDS", "fraction": "F", "top1": "F",
                "Path": "PATH", "output_file": "PATH", "precision_list": "LIST",
                "batch_list": "LIST", "case_id": "ID", "byte_size": "SIZE", "switch": "on|off",
                "tolerance": "F|auto"}


class RecordBaselines(argparse.Action):
    """--perf-update-baselines (True) and its form --perf-update-baselines=force ("force"): one
    flag without a value, whose `=force` is an option string of its own (argparse matches a whole
    option string before it splits at `=`); force stays, whichever is typed first."""

    def __init__(self, option_strings, dest, default=False, help=None, **_) -> None:
        super().__init__(option_strings, dest, nargs=0, default=default, help=help)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        forced = (option_string or "").endswith("=" + FORCE) or \
            getattr(namespace, self.dest, None) == FORCE
        setattr(namespace, self.dest, FORCE if forced else True)


@dataclass(frozen=True)
class Option:
    """One command-line option, or one KEY of `--perf-set` (then `flag` is the key, `iters`).
    `default` is the command line's (None: the profile's or the host's, settled in
    `Settings.resolved` or by the code that reads it); `convert` turns the parsed value into the
    `Settings` attribute; `train` names the `TrainConfig` field it sets; `forms` are further
    option strings of the same flag (`--perf-update-baselines=force`); `field` None: the row
    fills no attribute itself (`--perf-set`, whose keys fill theirs)."""
    flag: str
    help: str
    field: str | None = ""  # default: the flag without --perf- or --, dashes as underscores
    default: Any = None
    type: Callable[[str], Any] | None = None
    choices: tuple[str, ...] | None = None
    action: str | type[argparse.Action] | None = None  # store_true, append or an Action
    metavar: str | None = None
    train: str | None = None
    convert: Callable[[Any], Any] | None = None
    forms: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.field == "":
            name = self.flag.removeprefix("--").removeprefix("perf-")
            object.__setattr__(self, "field", name.replace("-", "_"))

    @property
    def dest(self) -> str:
        """The name pytest gives the value: `config.getoption(option.dest)`."""
        return self.flag.removeprefix("--").replace("-", "_")

    @property
    def placeholder(self) -> str:
        """What the value is called in the docs: N, PATH, {auto,full,smoke}, KEY=VALUE..."""
        if self.metavar:
            return self.metavar
        if self.choices:
            return "{" + ",".join(self.choices) + "}"
        if self.type is not None:
            return PLACEHOLDERS.get(getattr(self.type, "__name__", ""), "VALUE")
        return self.flag.rsplit("-", 1)[-1].upper()

    @property
    def invocation(self) -> str:
        """`--perf-runs N`, `--perf-profile {auto,full,smoke}`, `--perf-strict`,
        `--perf-update-baselines[=force]`; a key's `iters=N`."""
        if not self.flag.startswith("--"):
            return f"{self.flag}={self.placeholder}"
        if self.forms:
            return self.flag + "".join(f"[{form.removeprefix(self.flag)}]"
                                       for form in self.forms)
        if self.action == "store_true":
            return self.flag
        return f"{self.flag} {self.placeholder}"

    @property
    def takes_value(self) -> bool:
        """Whether the flag takes a value (`--perf-image PATH`), not a switch."""
        return self.action in (None, "append")

    def add_to(self, add: Callable[..., None]) -> None:
        """Register with a pytest option group's (or an argparse parser's) `addoption`."""
        keywords = {name: value for name, value in (
            ("type", self.type), ("choices", self.choices), ("action", self.action),
            ("metavar", self.metavar)) if value is not None}
        default = list(self.default) if self.action == "append" else self.default
        add(self.flag, *self.forms, default=default, help=self.help, **keywords)

    def parse(self, text: str) -> Any:
        """A key's VALUE as its setting (its parser, its choices); ArgumentTypeError says what is
        accepted."""
        if self.choices is not None and text not in self.choices:
            raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(self.choices)}")
        return self.value(self.type(text) if self.type is not None else text)

    def value(self, parsed: Any) -> Any:
        """The `Settings` attribute for the command line's value."""
        if self.convert is not None:
            return self.convert(parsed)
        return tuple(parsed) if self.action == "append" else parsed


@dataclass(frozen=True)
class Group:
    """Options that serve one purpose, a section of `--help` and of docs/options.md, with the
    `--perf-set` keys that serve it too."""
    name: str       # pytest's group name, perf-<name>
    title: str      # the section's heading
    options: tuple[Option, ...]
    keys: tuple[Option, ...] = ()
