"""What an optional part needs that this host may lack: NVIDIA DALI, torchvision, and the compiler
torch.compile builds with. The suite, the tools and `make perf` name a missing piece through here,
so the advice (which wheel, which way around it) reads the same everywhere.
"""
from __future__ import annotations

import os
import shutil
import sysconfig
from pathlib import Path

from .gpu_state import UNKNOWN

# The prefix of the environment record's `torchvision` where it does not import (environment.py).
UNAVAILABLE = "unavailable"


def dali_distribution(cuda_version: str | None) -> str:
    """DALI's wheel for the CUDA release torch was built with: `nvidia-dali-cuda130` on CUDA 13
    and later, `nvidia-dali-cuda120` on CUDA 12 and on a CPU build (its CPU pipelines run
    without a GPU). `nvidia-dali-cuda110` is never the answer: its registry entry is a stub."""
    try:
        major = int(str(cuda_version).split(".")[0])
    except ValueError:
        return "nvidia-dali-cuda120"
    return f"nvidia-dali-cuda{max(major, 12)}0"


def torchvision_problem(environment: dict) -> str | None:
    """Why torchvision does not import, from an environment record, or None where it does."""
    version = str(environment.get("torchvision", UNAVAILABLE))
    if not version.startswith(UNAVAILABLE):
        return None
    return version.removeprefix(UNAVAILABLE).lstrip(": ") or "not installed"


def data_backend_problem(backend: str, environment: dict) -> str | None:
    """Why data backend `backend` cannot run on the host an environment record describes (its
    `dali`, `torchvision` and `cuda` fields), naming what to install or use instead; else None."""
    torchvision = torchvision_problem(environment)
    if backend.startswith("dali") and environment.get("dali", UNKNOWN) == UNKNOWN:
        install = dali_distribution(environment.get("cuda"))
        instead = ("; torchvision imports here: --perf-data-backend torch reads the same JPEGs"
                   if torchvision is None else "")
        return (f"data backend {backend} needs NVIDIA DALI, which does not import here "
                f"(pip install {install}){instead}")
    if backend == "torch" and torchvision is not None:
        instead = "synthetic" if environment.get("dali", UNKNOWN) == UNKNOWN else "dali-cpu"
        return (f"data backend torch needs torchvision, which does not import here "
                f"({torchvision}); use {instead}")
    return None


def compile_problem(device_type: str) -> str | None:
    """Why torch.compile cannot build its kernels here, or None. On CUDA, Triton compiles a
    helper module at first use with a C compiler and Python's headers; on the CPU, inductor
    compiles C++ with the same headers."""
    if device_type == "cuda":
        names = [os.environ.get("CC"), "cc", "gcc", "clang"]
        kind = "a C compiler (Triton builds a helper at first use)"
    else:
        names = [os.environ.get("CXX"), "g++", "c++", "clang++"]
        kind = "a C++ compiler (inductor builds its CPU kernels)"
    missing = []
    if not any(name and shutil.which(name) for name in names):
        missing.append(f"no {' / '.join(name for name in names if name)} on PATH")
    headers = Path(sysconfig.get_paths()["include"])
    if not (headers / "Python.h").is_file():
        missing.append(f"no Python.h in {headers} (the python3-dev package, or "
                       f"python{sysconfig.get_python_version()}-dev)")
    if not missing:
        return None
    return f"torch.compile needs {kind} and Python's headers: {'; '.join(missing)}"
