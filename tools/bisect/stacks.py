"""Software stacks as a stack bisection names them: the A/B options that make one
(`--perf-candidate-python`, `-prefix`, `-env`), the stacks file (one stack a line), and what a
stack holds, read by running its own interpreter behind its prefix and settings (the variables
its processes see, its installed distributions and the files of each).

A stacks file, for `rn50-perf bisect --stacks FILE`: one stack a line, oldest
(the known good one) first, each line the A/B options of that stack, optionally after a name
and a colon; `#` starts a comment, blank lines are skipped; a name alone is this very stack:

    good:      --perf-candidate-env OMP_DISPLAY_ENV=FALSE
    nightly-2: --perf-candidate-python /opt/nightly-2/bin/python
    tag-24.10: --perf-candidate-prefix "apptainer exec --nv pytorch_24.10.sif"
    24.12:     --perf-candidate-image /shared/images/pytorch_24.12.sif

A line's --perf-candidate-image runs that stack inside the image (docs/containers.md), the first
line's too; --perf-container-runtime and --perf-image-python are the tool's, for every image.
"""
from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from perf_tests.cli.values import command_prefix, env_setting, interpreter
from perf_tests.containers import RUNTIMES, ContainerError, check_image, make_image
from perf_tests.runs.host import worker_environment
from perf_tests.runs.launch import Stack
from tools.cli import SUITE_ROOT
from tools.inputs import InputError

READ_TIMEOUT_SECONDS = 120

# Run by a stack's own interpreter: its variables, whether torch is there, per installed
# distribution (the first of a name on sys.path, the one imports find) its version, folder and
# entries, and the Debian packages where it runs. An entry is the largest folder holding files
# of this distribution alone (by every distribution's file list in the same folder: a package,
# its .dist-info with its licenses/ inside, a namespace member such as nvidia/nvtx or
# nvidia/cu13/lib where several distributions share nvidia/ and nvidia/cu13/), else the file
# itself (a module, a compiled extension, a .pth, an __init__.py several distributions list).
# So no entry lies inside another, and linking one never reaches into another's folder. Files
# outside the folder (`../../../bin/` console scripts, a wheel's .data) and absolute paths are
# left to the candidate: the suite runs `python -m`.
READ_STACK = r"""
import importlib.metadata as metadata, importlib.util, json, os, platform, re, sys
from rn50_model.stack_lock import debian_packages
installed, owners = [], {}
for dist in metadata.distributions():
    location = os.path.normpath(str(dist.locate_file("")))
    files = []
    for file in dist.files or []:
        parts = tuple(file.parts)
        if (not parts or os.path.isabs(str(file)) or ".." in parts or "__pycache__" in parts
                or parts[-1].endswith(".pyc")):
            continue
        files.append(parts)
        for depth in range(1, len(parts) + 1):
            owners.setdefault((location, parts[:depth]), set()).add(len(installed))
    installed.append((dist, location, files))
found = {}
for index, (dist, location, files) in enumerate(installed):
    name = dist.metadata["Name"] or ""
    key = re.sub(r"[-_.]+", "-", name).lower()
    if not key or key in found:
        continue
    entries = set()
    for parts in files:
        depth = next((d for d in range(1, len(parts) + 1)
                      if owners[(location, parts[:d])] == {index}), len(parts))
        entries.add("/".join(parts[:depth]))
    found[key] = {"name": name, "version": dist.version, "location": location,
                  "entries": sorted(entries), "listed_files": dist.files is not None}
print(json.dumps({"python": sys.executable, "python_version": platform.python_version(),
                  "torch": importlib.util.find_spec("torch") is not None,
                  "environ": dict(os.environ), "distributions": found,
                  "debian_packages": debian_packages()}))
"""


@dataclass(frozen=True)
class NamedStack:
    """A stack and what the user calls it (the stacks file's name, else its options)."""
    name: str
    stack: Stack


class LineParser(argparse.ArgumentParser):
    """The stack options of one stacks-file line: a bad one is an InputError, not an exit."""
    def error(self, message: str) -> None:
        raise InputError(message)


def add_stack_options(parser: argparse.ArgumentParser, images: bool = True) -> None:
    """The candidate's options; with `images`, those of the images both sides may run in (the
    tool's own, not a stacks-file line's)."""
    parser.add_argument("--perf-candidate-python", type=interpreter, metavar="PATH",
                        help="the candidate's interpreter (default this one)")
    parser.add_argument("--perf-candidate-image", metavar="IMAGE",
                        help="the candidate runs inside this container image (default none)")
    if images:
        parser.add_argument("--perf-image", metavar="IMAGE",
                            help="the reference runs inside this container image (default: "
                                 "this stack as it is)")
        parser.add_argument("--perf-container-runtime", choices=tuple(RUNTIMES),
                            help="the runtime that runs the images (default: the first "
                                 "installed that runs an image of its kind)")
        parser.add_argument("--perf-image-python", metavar="PATH",
                            help="the interpreter inside the images (default python3)")
    parser.add_argument("--perf-candidate-prefix", type=command_prefix, metavar="CMD",
                        help="a command that wraps the candidate's launches (default none)")
    parser.add_argument("--perf-candidate-env", type=env_setting, action="append", default=[],
                        metavar="KEY=VALUE",
                        help="a setting in the candidate's environment (repeatable)")


def stack_of(options: argparse.Namespace, images: argparse.Namespace | None = None) -> Stack:
    """The candidate the options name; its image on the runtime `images` (the tool's own
    options) names."""
    return Stack(python=options.perf_candidate_python or sys.executable,
                 prefix=options.perf_candidate_prefix or (),
                 env=tuple(options.perf_candidate_env),
                 image=image_of(options.perf_candidate_image, images or options))


def reference_of(options: argparse.Namespace) -> Stack:
    """The reference: this stack as it is, or inside --perf-image."""
    return Stack(image=image_of(options.perf_image, options))


def image_of(name: str | None, options: argparse.Namespace):
    if not name:
        return None
    try:
        return make_image(name, getattr(options, "perf_container_runtime", None),
                          getattr(options, "perf_image_python", None))
    except ContainerError as error:
        raise InputError(str(error)) from None


def read_stacks_file(path: Path, images: argparse.Namespace | None = None) -> list[NamedStack]:
    """The stacks of a stacks file, in order; InputError naming the file and line otherwise."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or error
        raise InputError(f"--stacks {path} cannot be read ({reason}); pass a text file with one "
                         "stack a line") from None
    stacks = []
    for number, line in enumerate(text.splitlines(), start=1):
        content = line.split("#", 1)[0].strip() if not line.lstrip().startswith("#") else ""
        if not content:
            continue
        name, colon, rest = content.partition(":")
        if not colon or " " in name.strip() or name.strip().startswith("-"):
            name, rest = "", content
        try:
            words = shlex.split(rest)
        except ValueError as error:
            raise InputError(f"--stacks {path} line {number} does not parse ({error}); "
                             "quote it as a shell would") from None
        parser = LineParser(prog=f"{path} line {number}", add_help=False)
        add_stack_options(parser, images=False)
        try:
            options, unknown = parser.parse_known_args(words)
        except InputError as error:
            raise InputError(f"--stacks {path} line {number}: {error}; fix the line") from None
        if unknown:
            raise InputError(f"--stacks {path} line {number}: {' '.join(unknown)!r} is not a "
                             "stack option; use --perf-candidate-python, --perf-candidate-prefix, "
                             "--perf-candidate-env or --perf-candidate-image")
        try:
            stack = stack_of(options, images)
        except InputError as error:
            raise InputError(f"--stacks {path} line {number}: {error}") from None
        stacks.append(NamedStack(name.strip() or f"line {number}", stack))
    return stacks


def describe(stack: Stack) -> str:
    """The stack as the A/B report names it, this stack's own interpreter named too."""
    return stack.describe() if not stack.is_default else f"this stack (python {sys.executable})"


def read_stack(stack: Stack, name: str, base_env: dict | None = None) -> dict:
    """What `stack` holds, read by its own interpreter behind its prefix and settings, in the
    environment the suite gives its workers (plus `base_env`); InputError where it does not
    start."""
    env = {**worker_environment(SUITE_ROOT), **(base_env or {})}
    if stack.image is not None:
        try:
            check_image(stack.image)
        except ContainerError as error:
            raise InputError(f"{name}: {error}") from None
    command = stack.wrap([sys.executable, "-c", READ_STACK], env, (SUITE_ROOT,), SUITE_ROOT)
    try:
        done = subprocess.run(command, cwd=SUITE_ROOT, env=env, capture_output=True, text=True,
                              timeout=READ_TIMEOUT_SECONDS)
    except FileNotFoundError as error:
        raise InputError(f"{name} ({describe(stack)}) does not start: {error.strerror} "
                         f"({error.filename}); check its options") from None
    except subprocess.TimeoutExpired:
        raise InputError(f"{name} ({describe(stack)}) did not answer in {READ_TIMEOUT_SECONDS} s; "
                         "check that its interpreter starts") from None
    try:
        facts = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else None
    except (ValueError, IndexError):
        facts = None
    if not isinstance(facts, dict):
        last = ((done.stderr or done.stdout).strip().splitlines() or
                [f"exit status {done.returncode}" if done.returncode else "it printed nothing"])[-1]
        raise InputError(f"{name} ({describe(stack)}) does not start: {last.strip()}; check "
                         "that its prefix and interpreter run")
    if not facts["torch"]:
        raise InputError(f"{name} ({describe(stack)}): its python {facts['python']} has no "
                         "torch; install torch there or pass another interpreter")
    return facts
