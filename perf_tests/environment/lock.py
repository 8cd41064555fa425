"""The session's environment lock in its results folder: the Python packages and versions and
the variables that shape a run, of the interpreter that runs the workers (and of an A/B
session's candidate), read by running that interpreter as a worker is run; and the host's
description (`uname`, `lscpu`, `nvidia-smi -q`).

Written once, as the session's first case starts, so that a session stopped in its first case
still has it and one that measured nothing leaves no folder; by whichever process gets there
first (pytest-xdist workers share the folder). `environment.lock.json` holds it all; beside it
`requirements.lock.txt` (and `requirements.candidate.lock.txt`) lists the packages as
`pip install -r` takes them. A stack or a command that cannot be read is one line in the lock,
never a failure of the session.
"""
from __future__ import annotations

import os
import platform
import shutil
import subprocess
import time
from pathlib import Path

from perf_tests.containers import identity as image_identity
from perf_tests.containers import image_variables
from perf_tests.containers.runtime import HOST_ONLY_VARIABLES
from perf_tests.core.storage import locked
from perf_tests.core.text import utc_now
from perf_tests.environment.differences import DEBIAN_PACKAGES
from perf_tests.runs.host import ProbeError, run_probe
from perf_tests.runs.launch import Stack
from perf_tests.runs.variables import FROM_IMAGE, compared_variables, with_variables
from rn50_model.files import write_json_atomically, write_text_atomically

SCHEMA_VERSION = 1
LOCK_FILE = "environment.lock.json"
REQUIREMENTS_FILE = "requirements.lock.txt"
CANDIDATE_REQUIREMENTS_FILE = "requirements.candidate.lock.txt"
STACK_MODULE = "rn50_model.stack_lock"
# The host's description: a command that hangs (nvidia-smi on a GPU that fell off the bus) is
# left out after this long, as a line, rather than holding the session.
COMMAND_TIMEOUT_SECONDS = 30
HOST_COMMANDS = {"lscpu": ["lscpu"], "nvidia_smi": ["nvidia-smi", "-q"]}


class StackReadings:
    """Each stack's `rn50_model.stack_lock`, read once a session: the lock holds it, and the
    variables every record and the header carry (perf_tests/runs/variables.py) come from the
    same reading, so the two cannot disagree."""

    def __init__(self, rootdir: Path) -> None:
        self.rootdir = rootdir
        self._read: dict[Stack, dict] = {}

    def of(self, stack: Stack) -> dict:
        """The stack's lock reading, with its image's identity (`image`) and the variables the
        image itself sets (`image_variables`) where it has one."""
        if stack not in self._read:
            reading = stack_lock_of(self.rootdir, stack)
            if stack.image is not None:
                reading = {"image": image_identity(stack.image),
                           "image_variables": image_variables(stack.image), **reading}
            self._read[stack] = reading
        return self._read[stack]

    def variables(self, stack: Stack) -> dict[str, str] | None:
        """`stack`'s variables that a verdict compares; None where it could not be read."""
        return compared_variables(self.of(stack))

    def stamp(self, stack: Stack) -> dict:
        """What every environment of `stack` carries beside its variables where it runs in an
        image: the image (`image`), which of the variables the image set (FROM_IMAGE) and its
        Debian packages; {} on the host."""
        if stack.image is None:
            return {}
        reading = self.of(stack)
        stamp = {"image": reading["image"], FROM_IMAGE: set_by_image(
            self.variables(stack) or {}, reading.get("image_variables") or {}, stack)}
        if reading.get(DEBIAN_PACKAGES):
            stamp[DEBIAN_PACKAGES] = reading[DEBIAN_PACKAGES]
        return stamp

    def stamped(self, environment: dict, stack: Stack) -> dict:
        """`environment` (a probe's, a worker's) with what this reading says of `stack`: its
        compared variables and, where it runs in one, its image (`stamp`)."""
        return {**with_variables(environment, self.variables(stack)), **self.stamp(stack)}


def set_by_image(variables: dict[str, str], image_sets: dict[str, str], stack: Stack) -> list[str]:
    """The names among `variables` whose value the image gave them: it sets that value and
    neither the shell nor the stack's settings do (a variable only the image may set, such as
    LD_LIBRARY_PATH, is the image's whenever the values agree)."""
    shell = {**os.environ, **dict(stack.env)}
    return sorted(name for name, value in variables.items() if image_sets.get(name) == value
                  and (name in HOST_ONLY_VARIABLES or shell.get(name) != value))


def write_environment_lock(folder: Path, rootdir: Path, candidate: Stack | None,
                           readings: StackReadings | None = None,
                           own: Stack = Stack()) -> Path | None:
    """Collect the lock of `own` (the session's stack) and `candidate` (from `readings` where
    the session has read its stacks already) and write it into `folder`, unless it is there
    already (another process of the session wrote it); the lock file's path, or None where it
    was there."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_FILE
    with locked(path):
        if path.exists():
            return None
        lock = collect_lock(candidate, readings or StackReadings(rootdir), own)
        for name, stack in ((REQUIREMENTS_FILE, lock),
                            (CANDIDATE_REQUIREMENTS_FILE, lock.get("candidate"))):
            if stack and "packages" in stack:
                write_text_atomically(folder / name, requirements_text(stack))
        write_json_atomically(path, lock)   # last: its presence means the set is whole
    return path


def collect_lock(candidate: Stack | None, readings: StackReadings,
                 own: Stack = Stack()) -> dict:
    """The lock: this session's stack at the top (its image's identity under `image`), the
    candidate's under `candidate`, the host under `host`, and how long collecting took."""
    started = time.monotonic()
    lock = {"schema_version": SCHEMA_VERSION, "written_at": utc_now(),
            **readings.of(own)}
    if candidate is not None:
        lock["candidate"] = {"stack": candidate.describe(), **readings.of(candidate)}
    lock["host"] = host_description()
    lock["collect_seconds"] = round(time.monotonic() - started, 3)
    return lock


def stack_lock_of(rootdir: Path, stack: Stack) -> dict:
    """`rn50_model.stack_lock` as run on `stack` in the workers' environment: its Python,
    packages and variables; `error` where it could not be read."""
    try:
        return run_probe(rootdir, STACK_MODULE, stack)
    except ProbeError as error:
        return {"error": str(error)}


def host_description() -> dict:
    """The kernel (uname) and what `lscpu` and `nvidia-smi -q` print (`output`, its lines), each
    command with a `note` where it is missing, failed or hung."""
    return {"uname": platform.uname()._asdict(),
            **{name: command_output(command) for name, command in HOST_COMMANDS.items()}}


def command_output(command: list[str]) -> dict:
    """`command`'s output lines (in the C locale, so they read the same on every host); `note`
    says why there are none, or that it exited with an error."""
    shown = " ".join(command)
    if shutil.which(command[0]) is None:
        return {"command": shown, "output": None, "note": f"{command[0]} is not on PATH"}
    try:
        done = subprocess.run(command, capture_output=True, text=True,
                              timeout=COMMAND_TIMEOUT_SECONDS, env={**os.environ, "LC_ALL": "C"})
    except subprocess.TimeoutExpired:
        return {"command": shown, "output": None,
                "note": f"{shown} took over {COMMAND_TIMEOUT_SECONDS} s; left out"}
    except OSError as error:
        return {"command": shown, "output": None,
                "note": f"{shown} cannot start ({error.strerror or error})"}
    described = {"command": shown, "output": done.stdout.splitlines()}
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        described["note"] = f"{shown} exited with {done.returncode}: {last}"
    return described


def requirements_text(stack: dict) -> str:
    """A stack's packages as `pip install -r` takes them, after a comment naming the
    interpreter."""
    header = (f"# The Python packages of {stack['executable']} (Python {stack['python']}), "
              f"from {LOCK_FILE}.\n# A local build such as torch's +cpu installs from its own "
              "index (pip install --index-url ...).\n")
    return header + "".join(f"{name}=={version}\n" for name, version in stack["packages"].items())
