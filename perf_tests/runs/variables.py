"""The environment variables a verdict compares with its baseline's: a slowdown made by one
(`DNNL_MAX_CPU_ISA=SSE41`, an image's `NCCL_ALGO`, a module's `LD_LIBRARY_PATH`) is named in
the failure line (`environment: DNNL_MAX_CPU_ISA unset -> SSE41`), and its repro command sets
them as the session had them (`env -u K` / `env K=V`), so that it reproduces in a fresh shell.

They are taken from what the suite hands a stack, as the session's environment lock reads it
(`python -m rn50_model.stack_lock`, run on the stack as a worker is run), once per stack, before
any launcher or torch adds its own: the agent sets OMP_NUM_THREADS with several workers a node
(as torchrun does, which also sets TORCH_NCCL_ASYNC_ERROR_HANDLING), torch sets
TORCHINDUCTOR_CACHE_DIR during a run; none of these is a change of the stack. That one set is
stamped into the session's header (its probe's environment) and into every run's record, so a
baseline promoted from a header, a gate judged on records and a report comparing the two all see
the same variables.
"""
from __future__ import annotations

from perf_tests.runs.network import SOCKET_IFNAME_VARIABLES
from rn50_model.stack_lock import WITHHELD

VARIABLES = "variables"   # their key in an environment (a header's, a record's, an entry's)
# ... and the names among them whose value the stack's image set, not the shell: named as the
# image's in a diff (`CUDA_LAUNCH_BLOCKING unset -> 1 (image b)`), left off a repro's `env`.
FROM_IMAGE = "variables_from_image"
# The families compared, by prefix: oneDNN's kernels (DNNL_, ONEDNN_: DNNL_MAX_CPU_ISA), ATen's
# (ATEN_CPU_CAPABILITY), the CPU threading runtimes (OMP_, KMP_, GOMP_, MKL_, OPENBLAS_), CUDA and
# its libraries (CUDA_, CUBLAS_, CUBLASLT_, CUDNN_, NVIDIA_, which holds NVIDIA_TF32_OVERRIDE), the
# collectives (NCCL_: NCCL_ALGO, NCCL_PROTO, NCCL_P2P_DISABLE), torch's own switches (TORCH_,
# PYTORCH_: PYTORCH_CUDA_ALLOC_CONF; TORCHINDUCTOR_ under --perf-set compile=on) and glibc's
# allocator (MALLOC_).
COMPARED_PREFIXES = ("DNNL_", "ONEDNN_", "ATEN_", "OMP_", "KMP_", "GOMP_", "MKL_", "OPENBLAS_",
                     "CUDA_", "CUBLAS_", "CUBLASLT_", "CUDNN_", "NVIDIA_", "NCCL_", "TORCH_",
                     "PYTORCH_", "TORCHINDUCTOR_", "MALLOC_")
# ... and by name: which libraries the dynamic loader finds first (a cluster module's or an
# image's cuDNN, a preloaded tcmalloc), glibc's tunables (its allocator's arenas), and the
# suite's own fault knob (rn50_model/faults.py): a session it slowed on purpose is not the
# stack as it is, and an auto band learns nothing of the host from it.
COMPARED_NAMES = ("LD_LIBRARY_PATH", "LD_PRELOAD", "GLIBC_TUNABLES", "RN50_FAULT")
# Within those families, what is not a change of the stack, and would otherwise be named on
# every other session: which devices a job was given (placement: the scheduler's or the
# container runtime's choice), which network interface a node talks on (the suite sets these
# per node under slurm and mpirun), and what an NGC image says of its own versions (dozens of
# CUDA_VERSION, CUDNN_VERSION, NCCL_VERSION..., repeating the versions compared already, and
# the build id the `container` field names) or of its runtime (NVIDIA_REQUIRE_CUDA,
# NVIDIA_DRIVER_CAPABILITIES).
PLACEMENT = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")
NOT_COMPARED = (*PLACEMENT, *SOCKET_IFNAME_VARIABLES, "NVIDIA_DRIVER_CAPABILITIES",
                "NVIDIA_PRODUCT_NAME")
NOT_COMPARED_PREFIXES = ("NVIDIA_REQUIRE_",)
# ... nor where a cache lives (TORCH_HOME, TORCH_EXTENSIONS_DIR, CUDA_CACHE_PATH): a path that
# names the user or a job's TMPDIR differs on every Slurm job and changes no kernel.
NOT_COMPARED_SUFFIXES = ("_VERSION", "_BUILD_ID", "_BUILD_NUMBER", "_DIR", "_HOME",
                         "_CACHE_PATH")
UNSET = "unset"


def is_compared(name: str) -> bool:
    return ((name.startswith(COMPARED_PREFIXES) or name in COMPARED_NAMES)
            and name not in NOT_COMPARED and not name.startswith(NOT_COMPARED_PREFIXES)
            and not name.endswith(NOT_COMPARED_SUFFIXES))


def compared_variables(stack_lock: dict) -> dict[str, str] | None:
    """The compared variables of a stack's lock reading (a secret's value withheld, as the lock
    holds it); None where the stack could not be read, so that nothing is compared rather than
    every variable taken as unset."""
    if "error" in stack_lock or not isinstance(stack_lock.get(VARIABLES), dict):
        return None
    return {name: value for name, value in stack_lock[VARIABLES].items() if is_compared(name)}


def with_variables(environment: dict, variables: dict[str, str] | None) -> dict:
    """`environment` (a probe's, a worker's) with the stack's compared variables in place of
    whatever it holds under `variables`; as it is where the stack could not be read."""
    if variables is None:
        return environment
    return {**environment, VARIABLES: variables}


def changed(baseline: dict, current: dict) -> list[tuple[str, str | None, str | None]]:
    """(name, the baseline's value, the current one; None: unset) for each compared variable
    that differs; none where either environment predates their recording (an older entry), so
    that a baseline without them names no phantom changes."""
    before, after = baseline.get(VARIABLES), current.get(VARIABLES)
    if not isinstance(before, dict) or not isinstance(after, dict):
        return []
    names = sorted(name for name in {*before, *after} if is_compared(name))
    return [(name, before.get(name), after.get(name)) for name in names
            if before.get(name) != after.get(name)]


def variables_diff(baseline: dict, current: dict) -> list[str]:
    """`DNNL_MAX_CPU_ISA unset -> SSE41`, `OMP_NUM_THREADS 4 -> unset`: each change, a value
    that a side's image set followed by that image's name (`1 (image b)`)."""
    def value(environment: dict, name: str, set_to: str | None) -> str:
        if set_to is None:
            return UNSET
        return f"{set_to} (image {image_name(environment)})" \
            if name in environment.get(FROM_IMAGE, ()) else set_to
    return [f"{name} {value(baseline, name, old)} -> {value(current, name, new)}"
            for name, old, new in changed(baseline, current)]


def image_name(environment: dict) -> str:
    """The image an environment ran in, as short as it reads: a folder's or a registry
    path's last part (`b`, `pytorch:24.12-py3`)."""
    name = str(environment.get("image", "")).split(" [", 1)[0]
    return name.rstrip("/").rsplit("/", 1)[-1] or name


def env_prefix(baseline: dict, current: dict) -> list[str]:
    """The `env` words that give a fresh shell the session's compared variables where they
    differed from the baseline's: `env -u OMP_NUM_THREADS DNNL_MAX_CPU_ISA=SSE41`; [] where
    none did. One the session's image set is left out (the image sets it again); a secret's
    value was never recorded, so it cannot be carried: it is left to the shell
    (docs/verdicts.md)."""
    changes = changed(baseline, current)
    brought = set(current.get(FROM_IMAGE, ()))   # the image sets them again where it runs
    unset = [word for name, _, new in changes if new is None for word in ("-u", name)]
    given = [f"{name}={new}" for name, _, new in changes
             if new is not None and new != WITHHELD and name not in brought]
    return ["env", *unset, *given] if unset or given else []
