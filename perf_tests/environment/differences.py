"""What differs between a result's run and its baseline's (or a candidate's and the
reference's): the container image, the versions and facts of the environment, the image's
Debian packages, the variables that shape a run (perf_tests/runs/variables.py) and the workload
settings, each as the one clause that a verdict's line, report.md and the tools name.
"""
from __future__ import annotations

from perf_tests.runs.variables import VARIABLES, variables_diff

# Environment facts worth naming when a result differs from its baseline, most telling first.
ENVIRONMENT_KEYS = ("device", "driver", "cuda", "cudnn", "nccl", "torch", "dali", "python",
                    "container", "os", "cpu", "cpu_count", "host", "commit")
# The container image a side ran in (perf_tests/containers/): its name, runtime and digest.
IMAGE, NO_IMAGE = "image", "none"
NO_CHANGE = "no change in"   # how an environment diff that names nothing begins
# The Debian packages of the image a side ran in (rn50_model/stack_lock.py): NGC's CUDA, cuDNN
# and NCCL are such packages. A diff names the first few, the GPU libraries' first.
DEBIAN_PACKAGES = "debian_packages"
ABSENT = "none"   # a package one side does not have
PACKAGES_NAMED = 6
TELLING_PACKAGES = ("cuda", "cudnn", "nccl", "cublas", "cufft", "curand", "cusparse", "nvidia",
                    "libnv", "tensorrt", "openmpi", "ucx", "libc6", "python3")
# Workload settings that leave a baseline comparable (the same work, run differently) but are
# worth naming when a result differs from it.
WORKLOAD_SETTINGS = ("threads", "memory_format", "launcher", "compile", "cuda_graphs")


def machine_differences(baseline: dict, current: dict) -> list[str]:
    """How the machine a baseline entry was recorded on differs from this one, one clause a
    fact ('device Intel Xeon Platinum 8480+ (baseline) vs AMD EPYC 7B13', 'cpu_count 16
    (baseline) vs 2'); empty for the same machine, or where the entry does not say. The same
    machine is the same device (the GPU's name; on a CPU host, the CPU's model) and, where the
    workers run on the CPU, as many CPUs for them: a driver, library or image is what the gate
    compares across, not the hardware. The host's name is not compared: identical nodes share
    one baseline."""
    def differs(key: str) -> bool:
        return key in baseline and key in current and str(baseline[key]) != str(current[key])

    clauses = [f"{key} {baseline[key]} (baseline) vs {current[key]}"
               for key in ("device",) if differs(key)]
    if not clauses and differs("hardware"):
        clauses.append(f"hardware {baseline['hardware']} (baseline) vs {current['hardware']}")
    on_cpu = not current.get("device_count") and not baseline.get("device_count")
    if on_cpu and differs("cpu_count"):
        clauses.append(f"cpu_count {baseline['cpu_count']} (baseline) vs {current['cpu_count']}")
    return clauses


def environment_changes(baseline: dict, current: dict) -> list[str]:
    """`image a.sif (...) -> b.sif (...)`, `driver 535.104 -> 550.54`, ...,
    `DNNL_MAX_CPU_ISA unset -> SSE41`: the container image first (`none` for a side that ran
    on the host as it is), then the versions and facts, the image's Debian packages, then the
    variables that shape a run (perf_tests/runs/variables.py): what changed inside an image
    follows its name."""
    before, after = baseline.get(IMAGE, NO_IMAGE), current.get(IMAGE, NO_IMAGE)
    image = [f"{IMAGE} {before} -> {after}"] if before != after else []
    return image + [f"{key} {baseline[key]} -> {current[key]}" for key in ENVIRONMENT_KEYS
                    if key in baseline and key in current
                    and str(baseline[key]) != str(current[key])] + packages_diff(
        baseline.get(DEBIAN_PACKAGES), current.get(DEBIAN_PACKAGES)) + variables_diff(baseline,
                                                                                      current)


def package_changes(before: dict, after: dict) -> list[str]:
    """`deb libcudnn9-cuda-12 9.5.0.50-1 -> 9.6.0.74-1`, `deb fuse3 none -> 3.14.0-4`: every
    Debian package added, removed or of another version, the GPU libraries' first."""
    names = sorted({*before, *after}, key=lambda name: (
        not any(word in name for word in TELLING_PACKAGES), name))
    return [f"deb {name} {before.get(name, ABSENT)} -> {after.get(name, ABSENT)}"
            for name in names if before.get(name) != after.get(name)]


def packages_diff(before: dict | None, after: dict | None) -> list[str]:
    """The first PACKAGES_NAMED of `package_changes`, then how many more; none where a side
    did not record its packages (the host, an older entry)."""
    if not isinstance(before, dict) or not isinstance(after, dict):
        return []
    changes = package_changes(before, after)
    more = len(changes) - PACKAGES_NAMED
    return changes[:PACKAGES_NAMED] + ([f"deb: {more} more packages differ (the environment "
                                        "lock lists them)"] if more > 0 else [])


def environment_diff(baseline: dict, current: dict) -> str:
    """`driver 535.104 -> 550.54, nccl 2.18.3 -> 2.19.3`: what changed since the baseline, or
    `no change in device, ..., variables`: what was compared."""
    if not baseline:
        return "the baseline records no environment"
    changes = environment_changes(baseline, current)
    compared = ([IMAGE] if IMAGE in baseline and IMAGE in current else []) + [
        key for key in ENVIRONMENT_KEYS[:6] if key in baseline]
    if VARIABLES in baseline and VARIABLES in current:
        compared.append(VARIABLES)
    return ", ".join(changes) if changes else f"{NO_CHANGE} " + ", ".join(compared)


def recorded_in(baseline: dict, current: dict) -> str:
    """`recorded in image /srv/images/a`, `recorded on the host`: where a baseline entry was
    recorded, where that was not the stack this result ran on; '' where it was (or the entry
    does not say). One baseline file holds one entry a case, whatever stack recorded it."""
    if IMAGE not in baseline and IMAGE not in current or not baseline:
        return ""
    before, after = baseline.get(IMAGE, NO_IMAGE), current.get(IMAGE, NO_IMAGE)
    if before == after:
        return ""
    if before == NO_IMAGE:
        return "recorded on the host"
    name, after_name = (side.split(" [", 1)[0] for side in (before, after))
    return f"recorded in image {name if name != after_name else before}"


def settings_diff(baseline: dict, current: dict,
                  names: tuple[str, ...] = WORKLOAD_SETTINGS) -> str:
    """`threads 2 -> 1`: the settings among `names` (the workload's) changed since the
    baseline, '' where none did (or the baseline does not record them). Entries recorded before
    settings were stored as the workers resolved them say `auto` (memory format): that names no
    setting, so no change."""
    return ", ".join(f"{key} {baseline[key]} -> {current[key]}" for key in names
                     if baseline.get(key) not in (None, "auto") and key in current
                     and str(baseline[key]) != str(current[key]))


def explained(message: str, environment: str | None, settings: str | None) -> str:
    """A verdict's line with what changed since its baseline: the failure line pytest shows and
    report.md keeps."""
    if environment:
        message += f"; environment: {environment}"
    if settings:
        message += f"; settings: {settings}"
    return message
