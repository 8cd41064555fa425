"""What an image's processes need of the suite itself: its packages importable inside (rn50_model,
which the workers and probes run; perf_tests, whose runs/network.py starts a node's agent; tools).

In a checkout they are in the folder the session runs from, which every image mounts and the
workers' PYTHONPATH names. Installed with pip they are in the host environment's site-packages,
which an image must not see whole (the host's torch there would shadow the image's): a folder of
links to the three packages (a temporary one a process) goes first on the image's PYTHONPATH,
and it and the packages are mounted at their own paths.
"""
from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

PACKAGES = ("perf_tests", "rn50_model", "tools")


def code_root() -> Path:
    """The folder holding the suite's packages: the checkout, or site-packages."""
    return Path(__file__).resolve().parents[2]


@functools.cache
def links_folder(root: Path) -> Path:
    """A folder of links to the suite's packages under `root`: one a process, removed as the
    process ends."""
    folder = Path(tempfile.mkdtemp(prefix="rn50-perf-suite-"))
    folder.chmod(0o755)   # a container's user other than root reads it too
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    for name in PACKAGES:
        if (root / name).is_dir():
            (folder / name).symlink_to(root / name)
    return folder


def image_code(pythonpath: str, mounts: Sequence[Path]) -> tuple[tuple[Path, ...], str | None]:
    """(what an image mounts for the suite's code, the PYTHONPATH that imports it there), where
    the image does not import it already: the workers' `pythonpath` names the folder holding
    it and `mounts` show it (a checkout); else ((), None)."""
    root = code_root()
    named = {Path(entry).resolve() for entry in pythonpath.split(os.pathsep) if entry}
    if root in named and any(root.is_relative_to(Path(mount).resolve()) for mount in mounts):
        return (), None
    links = links_folder(root)
    packages = tuple(root / name for name in PACKAGES if (root / name).is_dir())
    return (links, *packages), os.pathsep.join(filter(None, [str(links), pythonpath]))
