"""Two small stacks of real wheels from the package index, for the bisection's stack reading and
overlays: a reference and a candidate virtual environment, each seeing this environment's
packages (torch among them) through a .pth line, and each with wheels of its own installed by
pip as a user's upgrade installs them.

The candidate holds the layouts a CUDA build of torch brings (issue 63): nvidia-* libraries that
share the namespace folder nvidia/ (nvidia-nvtx-cu12 in nvidia/nvtx, nvidia-nvtx and
nvidia-cuda-profiler-api both in nvidia/cu13/, nvidia-nvtx-cu11 with an nvidia/__init__.py and
its own nvidia/nvtx/), PEP 639's .dist-info/licenses/ (the nvidia wheels, iniconfig 2.1.0 where
this environment has another), compiled extensions at the top level that find their libraries
in an auditwheel .libs folder through $ORIGIN (hidapi, whose .dist-info has licenses/ and
sboms/ too) and a .pth that runs code (pytest-cov 5.0.0). The reference has, alone, tabulate
(a console script in bin/, `../../../bin/tabulate` in its RECORD) and termcolor. 1.5 MB in all.

The wheels are downloaded once per machine (a fresh CI machine: once per run) into
~/.cache/rn50_perf/wheels/<key>, keyed by the pins, under a lock, so that test workers running
at once download them once; the environments are built from that folder with --no-index.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

REFERENCE_WHEELS = ("tabulate==0.9.0", "termcolor==2.4.0")
CANDIDATE_WHEELS = ("nvidia-nvtx-cu12==12.9.79", "nvidia-nvtx==13.5.25",
                    "nvidia-cuda-profiler-api==13.5.25", "nvidia-nvtx-cu11==11.8.86",
                    "hidapi==0.15.0", "iniconfig==2.1.0", "pytest-cov==5.0.0")


class WheelsUnavailable(RuntimeError):
    """The wheels cannot be downloaded here; the message is pip's last line."""


def cache_folder() -> Path:
    key = hashlib.sha256(repr((REFERENCE_WHEELS, CANDIDATE_WHEELS, sys.version_info[:2]))
                         .encode()).hexdigest()[:12]
    root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return root / "rn50_perf" / "wheels" / key


def downloaded_wheels() -> Path:
    """The folder of the wheels, downloaded there the first time."""
    folder = cache_folder()
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f"{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if folder.is_dir():
            return folder
        partial = folder.with_name(folder.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        for wheels in (REFERENCE_WHEELS, CANDIDATE_WHEELS):
            done = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet",
                                   "--no-deps", "--only-binary=:all:", "--dest", str(partial),
                                   *wheels], capture_output=True, text=True, timeout=600)
            if done.returncode != 0:
                last = (done.stderr.strip() or "no output").splitlines()[-1]
                raise WheelsUnavailable(f"pip cannot download {' '.join(wheels)}: {last}")
        partial.rename(folder)
    return folder


def seeing_venv(folder: Path) -> tuple[Path, Path]:
    """A virtual environment at `folder` that sees this one's packages (a .pth line): its
    interpreter and its site-packages folder."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()"
                                "['purelib'])"], capture_output=True, text=True,
                               check=True).stdout.strip())
    (site / "this-environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python, site


def wheel_venv(folder: Path, wheels: tuple[str, ...], cache: Path) -> Path:
    """A virtual environment at `folder` that sees this one's packages, with `wheels` installed
    by pip from `cache`; its interpreter."""
    python, _ = seeing_venv(folder)
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install",
                           "--quiet", "--no-deps", "--no-index", "--find-links", str(cache),
                           *wheels], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        last = (done.stderr.strip() or "no output").splitlines()[-1]
        raise WheelsUnavailable(f"pip cannot install {' '.join(wheels)}: {last}")
    return python


if __name__ == "__main__":
    try:
        print(downloaded_wheels())
    except WheelsUnavailable as error:
        print(error)
