"""What one Python interpreter runs a measurement with: every installed distribution and its
version, the operating system's Debian packages, and the environment variables that shape a
run. The session's environment lock holds
this for the interpreter that runs its workers and, in an A/B session, for the candidate's
(`python -m rn50_model.stack_lock` prints it as JSON, run on that stack). Standard library
only: a candidate interpreter answers even where its torch does not import.
"""
from __future__ import annotations

import json
import os
import platform
import sys
from collections.abc import Mapping
from importlib import metadata

# The variables a run's speed or behaviour depends on, by prefix: threading (OMP_, MKL_, KMP_,
# GOMP_, OPENBLAS_), oneDNN's kernels (DNNL_, ONEDNN_) and ATen's (ATEN_), CUDA and its libraries
# (CUDA_, CUBLAS_, CUBLASLT_, CUDNN_, NVIDIA_, which holds NVIDIA_TF32_OVERRIDE), communication
# (NCCL_, GLOO_, UCX_, FI_ for libfabric, MASTER_, WORLD_), torch and its compilers (TORCH_,
# PYTORCH_, TORCHINDUCTOR_, TORCHDYNAMO_, TRITON_), DALI_, the allocator (MALLOC_, TCMALLOC_), the
# interpreter (PYTHON: PYTHONPATH, PYTHONMALLOC, PYTHONHASHSEED), the scheduler's allocation
# (SLURM_) and this suite's own (RN50_: RN50_FAULT, RN50_DATA_CACHE). Only these are recorded, so a
# token or password elsewhere in the environment never lands in a results folder; and within them a
# name that says it holds a secret (NVIDIA_API_KEY, TORCH_HUB_TOKEN) is recorded with its value
# withheld.
RUN_SHAPING_PREFIXES = ("ATEN_", "OMP_", "MKL_", "KMP_", "GOMP_", "OPENBLAS_", "DNNL_", "ONEDNN_",
                        "CUDA_", "CUBLAS_", "CUBLASLT_", "CUDNN_", "NVIDIA_", "NCCL_", "GLOO_",
                        "UCX_", "FI_", "MASTER_", "WORLD_", "TORCH_", "PYTORCH_",
                        "TORCHINDUCTOR_", "TORCHDYNAMO_", "TRITON_", "DALI_", "MALLOC_",
                        "TCMALLOC_", "PYTHON", "SLURM_", "RN50_")
# ... and by name: what the dynamic loader and glibc take from the environment.
RUN_SHAPING_NAMES = ("LD_PRELOAD", "LD_LIBRARY_PATH", "GLIBC_TUNABLES")
DPKG_STATUS = "/var/lib/dpkg/status"
SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")
WITHHELD = "<withheld: the name says it is a secret>"


def installed_packages() -> dict[str, str]:
    """Every distribution this interpreter can import, name -> version, sorted by name; where
    two folders on sys.path hold one name, the first, as import finds it."""
    packages: dict[str, str] = {}
    seen: set[str] = set()
    for distribution in metadata.distributions():
        name = distribution.metadata["Name"]
        if name and name.lower() not in seen:
            seen.add(name.lower())
            packages[name] = distribution.version
    return dict(sorted(packages.items(), key=lambda item: item[0].lower()))


def debian_packages(status_file: str = DPKG_STATUS) -> dict[str, str]:
    """Every Debian package installed here, name -> version, sorted (dpkg's status file: an
    image's CUDA, cuDNN and NCCL come as such packages); {} where there is no dpkg."""
    try:
        with open(status_file, encoding="utf-8", errors="replace") as handle:
            stanzas = handle.read().split("\n\n")
    except OSError:
        return {}
    packages = {}
    for stanza in stanzas:
        fields = dict(line.split(": ", 1) for line in stanza.splitlines()
                      if ": " in line and not line.startswith(" "))
        if fields.get("Status", "").endswith(" installed") and "Package" in fields:
            name = fields["Package"]
            if name in packages:   # one package of two architectures
                name += f":{fields.get('Architecture', '')}"
            packages[name] = fields.get("Version", "")
    return dict(sorted(packages.items()))


def run_shaping_variables(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of `environ` that shape a run (RUN_SHAPING_PREFIXES, RUN_SHAPING_NAMES),
    the value of one whose name says it is a secret withheld."""
    return {name: WITHHELD if any(word in name.upper() for word in SECRET_WORDS)
            else environ[name] for name in sorted(environ)
            if name.startswith(RUN_SHAPING_PREFIXES) or name in RUN_SHAPING_NAMES}


def stack_lock(environ: Mapping[str, str]) -> dict:
    """This interpreter's part of the lock: its Python, its packages, the Debian packages where
    it runs and `environ`'s variables that shape a run."""
    return {"python": platform.python_version(), "executable": sys.executable,
            "packages": installed_packages(), "debian_packages": debian_packages(),
            "variables": run_shaping_variables(environ)}


def main() -> int:
    json.dump(stack_lock(os.environ), sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
