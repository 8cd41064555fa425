"""What a measurement ran on: software versions, the device, and the GPU's state through NVML.

Every record carries this, so a regression message can say what changed since the baseline
(`driver 535.104 -> 550.54`). Anything that cannot be read is recorded as "unknown", never
guessed; a CPU host's CUDA driver and libraries read "none". `python -m rn50_model.environment`
prints it as JSON, with the `preflight` the suite's session reports before its first case.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import torch

from .gpu_state import UNKNOWN, GpuIdentity, gpu_state, idle_gpu_state
from .host_state import load_average, pids_of_this_run, quietly
from .packages import UNAVAILABLE

REPOSITORY = Path(__file__).resolve().parent.parent
NONE = "none"   # a CPU host's CUDA driver and libraries: there are none, which is known
# Variables that name a container image: NGC's PyTorch images set the first two.
CONTAINER_VARIABLES = ("NVIDIA_PYTORCH_VERSION", "NVIDIA_BUILD_ID", "CONTAINER_IMAGE",
                       "IMAGE_NAME")


def cpuinfo_field(name: str) -> str | None:
    """The first CPU's `name` line of /proc/cpuinfo ('model name', 'flags'); None where there
    is no such line or file."""
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith(name):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def cpu_model() -> str:
    return cpuinfo_field("model name") or platform.processor() or UNKNOWN


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def hardware_key(device_name: str | None) -> str:
    """`nvidia-h200`, `tesla-v100-sxm2-16gb`, or `cpu-<model>` where there is no CUDA device."""
    if device_name:
        return slug(device_name)
    model = re.sub(r"\((r|tm)\)|\bcpu\b|\d+-core processor|processor", "", cpu_model(),
                   flags=re.IGNORECASE)
    return "cpu-" + (slug(model) or "unknown")


def dali_version() -> str:
    """DALI's version: the imported module's, else, where it can be imported, its distribution's
    (a run on synthetic data does not import DALI to name it: 0.2 s of every run's wall time on
    a CPU host); `unknown` where it cannot."""
    if "nvidia.dali" in sys.modules:
        return getattr(sys.modules["nvidia.dali"], "__version__", UNKNOWN)
    try:
        if importlib.util.find_spec("nvidia.dali") is None:
            return UNKNOWN
    except (ImportError, ValueError):
        return UNKNOWN
    found = [dist.version for dist in importlib.metadata.distributions()
             if (dist.metadata["Name"] or "").lower().startswith("nvidia-dali")]
    return found[0] if found else UNKNOWN


def torchvision_version() -> str:
    """The version, or why it does not import (a CUDA build of it fails with CPU torch)."""
    try:
        import torchvision
    except Exception as error:
        lines = str(error).strip().splitlines() or [type(error).__name__]
        return f"{UNAVAILABLE}: {lines[0]}"
    return torchvision.__version__


def nccl_version() -> str:
    if not torch.cuda.is_available():
        return absent_on_cpu()
    try:
        version = torch.cuda.nccl.version()
    except Exception:
        return UNKNOWN
    return ".".join(map(str, version)) if isinstance(version, tuple) else str(version)


def absent_on_cpu() -> str:
    """A CUDA library's version where no CUDA device answers: `none` for a CPU build of torch
    (there is none to read), else `unknown` (a CUDA build that sees no device: a driver fault?)."""
    return NONE if torch.version.cuda is None else UNKNOWN


def driver_version() -> str:
    try:
        completed = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return UNKNOWN
    lines = completed.stdout.split()
    return lines[0] if completed.returncode == 0 and lines else UNKNOWN


def repository_commit(repository: Path = REPOSITORY) -> str:
    """This repository's commit, `-dirty` where tracked files differ from it: the suite's own
    code is part of what a measurement ran on."""
    try:
        commit = subprocess.run(["git", "-C", str(repository), "rev-parse", "--short=12", "HEAD"],
                                capture_output=True, text=True, timeout=10)
        status = subprocess.run(["git", "-C", str(repository), "status", "--porcelain",
                                 "--untracked-files=no"], capture_output=True, text=True,
                                timeout=10)
    except (OSError, subprocess.SubprocessError):
        return UNKNOWN
    if commit.returncode != 0 or not commit.stdout.strip():
        return UNKNOWN
    return commit.stdout.strip() + ("-dirty" if status.stdout.strip() else "")


def container_image() -> str:
    """The image as its variables name it (`NVIDIA_PYTORCH_VERSION=24.01, NVIDIA_BUILD_ID=...`),
    `none` outside a container, `unnamed` in one that names none."""
    named = [f"{name}={os.environ[name]}" for name in CONTAINER_VARIABLES if os.environ.get(name)]
    if named:
        return ", ".join(named)
    in_container = os.path.exists("/.dockerenv") or os.path.exists("/run/.containerenv")
    return "unnamed" if in_container else "none"


def os_release(path: str = "/etc/os-release") -> str:
    try:
        with open(path) as handle:
            fields = dict(line.rstrip("\n").split("=", 1) for line in handle if "=" in line)
    except OSError:
        return UNKNOWN
    return fields.get("PRETTY_NAME", UNKNOWN).strip('"')


def device_name(device: torch.device) -> str:
    """What the device is called: the GPU's name (`NVIDIA H200`), else the CPU's model."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_model()


def collect_environment(device: torch.device | None = None) -> dict:
    """Versions and device facts for a record; `device` None means the first CUDA device if any."""
    cuda = torch.cuda.is_available()
    environment = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda or NONE,
        "cudnn": str(torch.backends.cudnn.version() or UNKNOWN) if cuda else absent_on_cpu(),
        "nccl": nccl_version(),
        "dali": dali_version(),
        "torchvision": torchvision_version(),
        "driver": NONE if shutil.which("nvidia-smi") is None else driver_version(),
        "host": socket.gethostname(),
        "cpu": cpu_model(),
        "cpu_count": len(os.sched_getaffinity(0)),
        "device_count": torch.cuda.device_count() if cuda else 0,
        "container": container_image(),
        "os": os_release(),
        "commit": repository_commit(),
    }
    if cuda:
        device = device if device is not None and device.type == "cuda" else torch.device("cuda", 0)
        environment["device"] = device_name(device)
        major, minor = torch.cuda.get_device_capability(device)
        environment["compute_capability"] = f"{major}.{minor}"
        state = gpu_state(GpuIdentity.of(device))
        driver = state.pop("driver", None)
        environment["driver"] = driver if driver not in (None, UNKNOWN) else driver_version()
        environment["gpu_state"] = state or UNKNOWN
    else:
        environment["device"] = environment["cpu"]
    environment["hardware"] = hardware_key(environment["device"] if cuda else None)
    return environment


def preflight() -> dict:
    """Every visible GPU's state at rest (`idle_gpu_state`; `device` is torch's index) and the
    host's load average (over the environment's `cpu_count`), from which the suite's session
    says what is off before it measures. The suite's own processes (pytest and this probe) are
    not other processes on a GPU."""
    devices = torch.cuda.device_count() if torch.cuda.is_available() else 0
    own = quietly(pids_of_this_run) or set()
    gpus = [{"device": index, **idle_gpu_state(GpuIdentity.of(torch.device("cuda", index)), own)}
            for index in range(devices)]
    return {"gpus": gpus, "loadavg": quietly(load_average, Path("/"))}


def main() -> int:
    json.dump({**collect_environment(), "preflight": preflight()}, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
