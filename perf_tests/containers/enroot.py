"""enroot: an image is a squashfs file (`enroot import`) or a container made from one
(`enroot create --name`). `enroot start --mount SRC:DST --env NAME IMAGE`: the host's network,
IPC and process ids are shared; variables pass by name with --env; enroot has no
working-directory option, so the command changes directory itself (`sh -c 'cd DIR && exec ...'`,
which any image's shell runs). GPUs go in through enroot's NVIDIA hook, which acts on
NVIDIA_VISIBLE_DEVICES. Under Slurm with pyxis, `srun --container-image` runs a squashfs file
(`pyxis_options`); a named container goes through `enroot start` on each node.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from perf_tests.containers.runtime import (Image, Runtime, file_digest, last_line, passed_variables,
                                           run_quietly, unique_paths)

# Changes to the working directory, then runs the rest: `sh -c CD DIR python3 ...`.
CD = 'cd "$0" && exec "$@"'

GPU_VARIABLES = ("NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=compute,utility")


class Enroot(Runtime):
    name = "enroot"
    program = "enroot"
    install_hint = "install enroot (github.com/NVIDIA/enroot)"
    gpu_flags_doc = "--env NVIDIA_VISIBLE_DEVICES=all (enroot's 98-nvidia.sh hook)"

    def can_run(self, image_name: str) -> bool:
        return image_name.endswith((".sqsh", ".squashfs"))

    def missing(self, image: Image) -> str | None:
        if Path(image.name).is_file():
            return None
        done = run_quietly([self.program, "list"])
        if done.returncode == 0 and image.name in done.stdout.split():
            return None
        return (f"{image.name} is neither a squashfs file nor a container in `enroot list`"
                + (f" ({last_line(done)})" if done.returncode else ""))

    def command(self, image: Image, mounts: Sequence[Path], workdir: Path,
                env: Mapping[str, str], gpus: bool, label: str = "") -> list[str]:
        argv = [self.program, "start"]
        for path in unique_paths(mounts):
            argv += ["--mount", f"{path}:{path}"]
        for name in passed_variables(env):
            argv += ["--env", name]
        for setting in GPU_VARIABLES if gpus else ():
            argv += ["--env", setting]
        return [*argv, image.name, "sh", "-c", CD, str(Path(workdir).resolve())]

    def identity(self, image: Image) -> str:
        path = Path(image.name)
        return file_digest(path) if path.is_file() else f"enroot container {image.name}"


def pyxis_options(image: Image, mounts: Sequence[Path], workdir: Path) -> list[str]:
    """srun's options (pyxis) that run a step's tasks in `image`, mounts at their own paths."""
    paths = unique_paths(mounts)
    return [f"--container-image={image.name}",
            f"--container-mounts={','.join(f'{path}:{path}' for path in paths)}",
            f"--container-workdir={Path(workdir).resolve()}"]
