"""enroot: an image is a squashfs file (`enroot import`) or a container made from one
(`enroot create --name`). `enroot start --mount SRC:DST --env NAME IMAGE`: the host's network
and IPC are shared; variables pass by name with --env; enroot has no working-directory option,
so the command changes directory itself (`env -C DIR`). GPUs go in through enroot's NVIDIA hook,
which acts on NVIDIA_VISIBLE_DEVICES. Under Slurm with pyxis, `srun --container-image` runs the
same image (`pyxis_options`).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from .runtime import Image, Runtime, file_digest, last_line, passed_variables, run_quietly

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
                env: Mapping[str, str], gpus: bool) -> list[str]:
        argv = [self.program, "start"]
        for path in dict.fromkeys(Path(path).resolve() for path in mounts):
            argv += ["--mount", f"{path}:{path}"]
        for name in passed_variables(env):
            argv += ["--env", name]
        for setting in GPU_VARIABLES if gpus else ():
            argv += ["--env", setting]
        return [*argv, image.name, "env", "-C", str(Path(workdir).resolve())]

    def identity(self, image: Image) -> str:
        path = Path(image.name)
        return file_digest(path) if path.is_file() else f"enroot container {image.name}"


def pyxis_options(image: Image, mounts: Sequence[Path], workdir: Path) -> list[str]:
    """srun's options (pyxis) that run a step's tasks in `image`, mounts at their own paths."""
    paths = dict.fromkeys(str(Path(path).resolve()) for path in mounts)
    return [f"--container-image={image.name}",
            f"--container-mounts={','.join(f'{path}:{path}' for path in paths)}",
            f"--container-workdir={Path(workdir).resolve()}"]
