"""apptainer (and singularity): an image is a .sif file (or a sandbox folder, or a URI it
pulls). `apptainer exec --nv --bind SRC --pwd DIR IMAGE`: apptainer shares the host's network,
IPC, process ids and /dev/shm and passes the host's variables by default (PATH and the library
path are the image's, and so is any variable the image's own environment sets: unlike the
other runtimes, there the image's value wins); `--nv` binds the GPUs and the driver's
libraries.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from perf_tests.containers.runtime import Image, Runtime, file_digest, unique_paths

URI_SCHEMES = ("docker://", "oras://", "library://", "shub://", "docker-archive:")


class Apptainer(Runtime):
    name = "apptainer"
    program = "apptainer"
    install_hint = "install apptainer (apptainer.org), or load its module"
    gpu_flags_doc = "--nv"

    def can_run(self, image_name: str) -> bool:
        return image_name.endswith(".sif") or image_name.startswith(URI_SCHEMES)

    def missing(self, image: Image) -> str | None:
        if image.name.startswith(URI_SCHEMES) or Path(image.name).exists():
            return None
        return f"{image.name} does not exist"

    def command(self, image: Image, mounts: Sequence[Path], workdir: Path,
                env: Mapping[str, str], gpus: bool, label: str = "") -> list[str]:
        argv = [self.program, "exec", *(["--nv"] if gpus else [])]
        for path in unique_paths(mounts):
            argv += ["--bind", str(path)]
        return [*argv, "--pwd", str(Path(workdir).resolve()), image.name]

    def identity(self, image: Image) -> str:
        path = Path(image.name)
        if path.is_file():
            return file_digest(path)
        return image.name   # a sandbox folder or a URI: its name is all it says
