"""The image path of `tools/gpu/check.py`: a short amp run whose workers run inside a bwrap image
made of this machine's own root (`/`), with this interpreter, so that the container is all that
differs from the host's own amp path; the suite's bwrap runtime (perf_tests/containers/) makes
the command and passes the GPUs, as `--perf-image / --perf-container-runtime bwrap` does.
Where bwrap is absent or cannot start here, the path says why, and how to bring bwrap.
"""
from __future__ import annotations

import shutil
import sys

from perf_tests.containers import ContainerError, make_image
from perf_tests.runs.host import ProbeError, run_probe
from perf_tests.runs.launch import Stack
from tools.cli import SUITE_ROOT

OWN_ROOT, RUNTIME = "/", "bwrap"
# How the GPU lease of 2026-11-28 brought bwrap to a machine with no package manager.
BRING_BWRAP = (f"{RUNTIME} is not on PATH: apt-get install bubblewrap, or where no package "
               "manager reaches (the project's GPU machine) copy /usr/bin/bwrap from a Debian 12 "
               "machine into a folder carried beside the checkout and put that folder on PATH "
               "(docs/gpu.md#images-on-the-gpu)")
IMAGE_READY = f"{RUNTIME} starts this python over {OWN_ROOT} here"


def own_root_stack() -> Stack:
    """The workers on this interpreter inside bwrap, the image being this machine's root."""
    return Stack(image=make_image(OWN_ROOT, RUNTIME, sys.executable))


def image_problem() -> str | None:
    """Why the image path cannot run here: bwrap is not on PATH, or it cannot start this
    interpreter over `/` and read the environment there (the probe the suite runs inside an
    image before measuring); None where it can."""
    if shutil.which(RUNTIME) is None:
        return BRING_BWRAP
    try:
        run_probe(SUITE_ROOT, "rn50_model.environment", own_root_stack(),
                  role="this machine's root as an image")
    except (ProbeError, ContainerError) as error:
        return str(error)
    return None
