"""What every container runtime gives the suite: the command that runs a program inside an
image, whether the image is there, and what identifies it. One `Runtime` a module
(docker and podman, apptainer, enroot, bwrap); perf_tests/containers/__init__.py picks one.

The conventions they share: the checkout and the session's folders are bind-mounted at the same
paths (so every path the suite hands a worker holds inside), the host's network and IPC are the
container's (the workers' store, NCCL, /dev/shm), GPUs are passed where the host has
them, and the host's variables reach the workers, but for the few that describe the host's own
installation (HOST_ONLY_VARIABLES): inside, the image's own apply.
"""
from __future__ import annotations

import hashlib
import shutil
import subprocess
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from perf_tests.containers.root_contents import ListingError, root_content_hash

DEFAULT_PYTHON = "python3"
# A root folder's PATH where its /etc/environment sets none (Debian's default).
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# The host's interpreter, library search paths, home and temporary folders and Python
# environments: inside an image its own apply.
HOST_ONLY_VARIABLES = frozenset({"PATH", "LD_LIBRARY_PATH", "LD_PRELOAD", "VIRTUAL_ENV",
                                 "PYTHONHOME", "HOME", "TMPDIR", "PWD", "OLDPWD", "HOSTNAME",
                                 "SHLVL", "_", "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "CONDA_EXE",
                                 "CONDA_PYTHON_EXE", "CONDA_SHLVL", "XDG_RUNTIME_DIR"})
# The label docker and podman put on a run's containers (its run folder), to remove what a
# killed client left running.
RUN_LABEL = "rn50.run"
INSPECT_TIMEOUT_SECONDS = 60


class ContainerError(Exception):
    """An image or runtime that cannot be used: one line naming it and what to do."""


@dataclass(frozen=True)
class Image:
    """A container image as the user names it, the runtime that runs it and the interpreter
    inside that runs the workers."""
    name: str
    runtime: str
    python: str = DEFAULT_PYTHON

    def describe(self) -> str:
        """`nvcr.io/nvidia/pytorch:24.10-py3 (docker)`."""
        python = f", python {self.python}" if self.python != DEFAULT_PYTHON else ""
        return f"{self.name} ({self.runtime}{python})"


def passed_variables(env: Mapping[str, str]) -> list[str]:
    """The names of `env` that go into an image: all but the host-only ones."""
    return sorted(name for name in env if name not in HOST_ONLY_VARIABLES)


def unique_paths(paths: Sequence[Path]) -> list[Path]:
    """`paths` made absolute, each once, in order: what a runtime binds."""
    return list(dict.fromkeys(Path(path).resolve() for path in paths))


def host_has_gpus() -> bool:
    """Whether this host has NVIDIA GPUs to pass into a container (its device nodes)."""
    return Path("/dev/nvidiactl").exists()


def file_digest(path: Path) -> str:
    """`sha256:<hex>` of a file's contents (a .sif or squashfs image)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return f"sha256:{digest.hexdigest()}"


def run_quietly(argv: list[str]) -> subprocess.CompletedProcess:
    """A runtime's own query (inspect, list), its output captured; a hung one is a failure."""
    try:
        return subprocess.run(argv, capture_output=True, text=True,
                              timeout=INSPECT_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(argv, 124, "", f"{argv[0]} did not answer in "
                                           f"{INSPECT_TIMEOUT_SECONDS} s")


def last_line(done: subprocess.CompletedProcess) -> str:
    return ((done.stderr or done.stdout or "").strip().splitlines()
            or [f"exit status {done.returncode}"])[-1].strip()


def root_environment(root: Path) -> dict[str, str]:
    """The variables a root filesystem image sets: its /etc/environment (KEY=VALUE lines, as
    enroot and pam read it), quotes removed."""
    try:
        lines = (root / "etc" / "environment").read_text().splitlines()
    except OSError:
        return {}
    found = {}
    for line in lines:
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.removeprefix("export ").partition("=")
            found[key.strip()] = value.strip().strip("'\"")
    return found


def root_path_origin(root: Path) -> str:
    """Where a root folder's PATH comes from (bwrap's, and podman's with --rootfs)."""
    path = root_environment(root).get("PATH")
    if path:
        return f"its /etc/environment's PATH {path}"
    return (f"Debian's default PATH {DEFAULT_PATH} (its /etc/environment sets none; a venv's "
            "bin is on the PATH only where a PATH line there names it)")


def root_identity(root: Path) -> str:
    """`content sha256:<12 hex>`: a hash of every file of a root filesystem folder
    (perf_tests/containers/root_contents.py)."""
    try:
        return f"content sha256:{root_content_hash(root)[:12]}"
    except ListingError as error:
        return f"content unknown ({error})"


def root_missing(root: Path) -> str | None:
    """Why `root` is not a root filesystem image, else None."""
    if not root.exists():
        return f"{root} does not exist"
    if not root.is_dir() or not (root / "usr").is_dir():
        return f"{root} is not a root filesystem folder (no usr/ in it)"
    return None


class Runtime(ABC):
    name: str
    program: str
    install_hint: str          # how to get it: `apt-get install bubblewrap`
    gpu_flags_doc: str = ""    # how GPUs go in, as its documentation says (docs/containers.md)

    def installed(self) -> bool:
        return shutil.which(self.program) is not None

    def can_run(self, image_name: str) -> bool:
        """Whether an image named so is of this runtime's kind (a root folder, a .sif file...),
        used to pick a runtime where none is asked for."""
        return True

    @abstractmethod
    def missing(self, image: Image) -> str | None:
        """Why `image` is not there for this runtime (not pulled, no such file), else None."""

    @abstractmethod
    def command(self, image: Image, mounts: Sequence[Path], workdir: Path,
                env: Mapping[str, str], gpus: bool, label: str = "") -> list[str]:
        """The command line up to the interpreter: what runs a program in `image` with
        `mounts` bound at their own paths, in `workdir`, with `env`'s variables (but the
        host-only ones) and, where `gpus`, the host's GPUs; `label`: the run it is part of."""

    def remove(self, label: str) -> None:
        """End the containers of the run `label` that outlived their client (a runtime whose
        containers are not the client's children)."""

    @abstractmethod
    def identity(self, image: Image) -> str:
        """What identifies the image's contents: a digest, a content hash."""

    def image_variables(self, image: Image) -> dict[str, str] | None:
        """The variables the image itself sets (its /etc/environment, its config's ENV), PATH
        among them; None where the runtime cannot say without running it."""
        return None

    def path_origin(self, image: Image) -> str:
        """Where the PATH an interpreter is looked up on inside `image` comes from, as a
        clause: `its /etc/environment's PATH /opt/venv/bin:/usr/bin`."""
        return "the image's own PATH"
