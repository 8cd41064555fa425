"""Container images as stacks: `--perf-image` runs a session's workers inside an image,
`--perf-candidate-image` an A/B candidate's. Each runtime is a module of this package (docker
and podman in oci.py, apptainer, enroot with pyxis, bwrap; what they share runtime.py, a root
folder's identity root_contents.py); this one picks the runtime, checks an image before anything
is measured, and makes the command that runs inside it. It imports no other folder of
perf_tests; of the workload (rn50_model), its atomic writes.
"""
from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from perf_tests.containers.apptainer import Apptainer
from perf_tests.containers.bwrap import Bwrap
from perf_tests.containers.enroot import Enroot, pyxis_options
from perf_tests.containers.oci import Docker, Podman
from perf_tests.containers.runtime import (DEFAULT_PYTHON, ContainerError, Image, Runtime,
                                           host_has_gpus, passed_variables)

RUNTIMES: dict[str, Runtime] = {runtime.name: runtime for runtime in
                                (Docker(), Podman(), Apptainer(), Enroot(), Bwrap())}

__all__ = ["DEFAULT_PYTHON", "RUNTIMES", "ContainerError", "Image", "check_image",
           "runtime_command", "host_has_gpus", "identity", "image_variables", "make_image",
           "passed_variables", "path_origin", "pyxis_options", "remove_containers"]


def make_image(name: str, runtime: str | None, python: str | None = None) -> Image:
    """The image `name` on `runtime`, or where none is asked for, on the first runtime that
    is installed and runs images of its kind (a root folder: bwrap; a .sif: apptainer; a
    squashfs: enroot; else a name in docker's or podman's store), in RUNTIMES' order."""
    python = python or DEFAULT_PYTHON
    if Path(name).exists():   # a file or folder: one name wherever the runtime starts
        name = str(Path(name).resolve())
    if runtime:
        return Image(name, runtime, python)
    if name.startswith(("/", ".")) and not Path(name).exists():
        raise ContainerError(f"image {name} does not exist; pass a root filesystem folder, a "
                             ".sif or squashfs file that exists, or an image's name")
    fitting = [each for each in RUNTIMES.values() if each.can_run(name)]
    for each in fitting:
        if each.installed():
            return Image(name, each.name, python)
    kinds = ", ".join(each.name for each in fitting) or "none"
    raise ContainerError(f"image {name}: no container runtime that runs it is installed "
                         f"(tried {kinds}); install one, or name it with "
                         "--perf-container-runtime")


def check_image(image: Image) -> None:
    """ContainerError where `image`'s runtime is not installed or the image is not there; what
    runs inside is checked by the probes that run there next (perf_tests/runs/host.py)."""
    runtime = RUNTIMES[image.runtime]
    if shutil.which(runtime.program) is None:
        raise ContainerError(f"--perf-container-runtime {runtime.name}: {runtime.program} is not "
                             f"on PATH; {runtime.install_hint}, or pick another runtime")
    missing = runtime.missing(image)
    if missing:
        raise ContainerError(f"image {image.name} ({runtime.name}): {missing}; build or pull "
                             "it first, or fix the name")


def runtime_command(image: Image, mounts: Sequence[Path], workdir: Path,
                    env: Mapping[str, str], gpus: bool | None = None,
                    label: str = "") -> list[str]:
    """The runtime's command line that runs a program in `image` (the interpreter and its
    arguments follow); GPUs passed where this host has them, unless told; `label` names the
    run (its folder), for `remove_containers`."""
    gpus = host_has_gpus() if gpus is None else gpus
    return RUNTIMES[image.runtime].command(image, mounts, workdir, env, gpus, label)


def remove_containers(image: Image, label: str) -> None:
    """After a run: end its containers that outlived their client (docker, podman)."""
    RUNTIMES[image.runtime].remove(label)


def identity(image: Image) -> str:
    """`<name> [<runtime>: <digest or content hash>]`, how environments and baselines name the
    image (no comma: an environment diff lists its changes with commas)."""
    return f"{image.name} [{image.runtime}: {RUNTIMES[image.runtime].identity(image)}]"


def image_variables(image: Image) -> dict[str, str] | None:
    """The variables `image` itself sets (its /etc/environment, its config's ENV); None where
    its runtime cannot say."""
    return RUNTIMES[image.runtime].image_variables(image)


def path_origin(image: Image) -> str:
    """Where the PATH its interpreter is looked up on comes from, as a clause for a line."""
    return RUNTIMES[image.runtime].path_origin(image)
