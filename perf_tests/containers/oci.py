"""docker and podman: an image is a name in the runtime's image store (pull it first); podman
also runs a root filesystem folder (`--rootfs DIR:O`, its writes kept in an overlay, its
/etc/environment's variables given as bwrap gives them) where it is named with
--perf-container-runtime podman. A run's containers carry its label; those a killed client left
running (they are the daemon's or conmon's children, not the client's) are removed after it.

`docker run --rm --network host --ipc host --pid host -v SRC:SRC -w DIR -e NAME ... IMAGE`: the
host's network, IPC and process ids, each mount at its own path, each passed variable by name (its
value from the launch's environment, so none lands on a command line). GPUs: docker's `--gpus all`
(the NVIDIA Container Toolkit), podman's CDI device `nvidia.com/gpu=all`."""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from perf_tests.containers.runtime import (RUN_LABEL, ContainerError, Image, Runtime, last_line,
                                           passed_variables, root_environment, root_identity,
                                           root_missing, root_path_origin, run_quietly,
                                           unique_paths)


class Docker(Runtime):
    name = "docker"
    program = "docker"
    install_hint = "install Docker Engine and the NVIDIA Container Toolkit"
    gpu_flags = ["--gpus", "all"]
    gpu_flags_doc = "--gpus all (NVIDIA Container Toolkit)"

    def can_run(self, image_name: str) -> bool:
        """A name in its store (`nvcr.io/nvidia/pytorch:24.10-py3`), not a path."""
        return (not image_name.startswith(("/", ".")) and not Path(image_name).exists()
                and not image_name.endswith((".sif", ".sqsh", ".squashfs")))

    def missing(self, image: Image) -> str | None:
        done = run_quietly([self.program, "image", "inspect", image.name])
        if done.returncode == 0:
            return None
        if "Cannot connect to the Docker daemon" in done.stderr:
            raise ContainerError(f"--perf-container-runtime {self.name}: {last_line(done)}; "
                                 "start the daemon (systemctl start docker, or dockerd), or "
                                 "point DOCKER_HOST at one that runs")
        return f"{self.program} image inspect {image.name} failed: {last_line(done)}"

    def command(self, image: Image, mounts: Sequence[Path], workdir: Path,
                env: Mapping[str, str], gpus: bool, label: str = "") -> list[str]:
        # The host's process ids too: a node's host probe tells the run's own processes, in
        # every node's container, from the others' by their token in the host's /proc
        # (rn50_model/host_state.py).
        argv = [self.program, "run", "--rm", "--network", "host", "--ipc", "host", "--pid",
                "host", *(self.gpu_flags if gpus else []),
                *(["--label", f"{RUN_LABEL}={label}"] if label else [])]
        for path in unique_paths(mounts):
            argv += ["-v", f"{path}:{path}"]
        argv += ["-w", str(Path(workdir).resolve())]
        for name in passed_variables(env):
            argv += ["-e", name]
        return [*argv, *self.image_options(image, env)]

    def image_options(self, image: Image, env: Mapping[str, str]) -> list[str]:
        """What names the image, last on the command line."""
        return [image.name]

    def remove(self, label: str) -> None:
        listed = run_quietly([self.program, "ps", "-aq", "--filter", f"label={RUN_LABEL}={label}"])
        if listed.returncode == 0 and listed.stdout.split():
            run_quietly([self.program, "rm", "-f", *listed.stdout.split()])

    def identity(self, image: Image) -> str:
        """The image's id, and its registry digest where it has one."""
        done = run_quietly([self.program, "image", "inspect", "--format",
                            "{{.Id}} {{json .RepoDigests}}", image.name])
        if done.returncode != 0:
            return f"unknown ({last_line(done)})"
        image_id, _, digests = done.stdout.strip().partition(" ")
        try:
            repo_digests = json.loads(digests) or []
        except ValueError:
            repo_digests = []
        return " ".join([image_id, *repo_digests[:1]])

    def image_variables(self, image: Image) -> dict[str, str] | None:
        """Its config's ENV (`docker image inspect`), PATH among them."""
        done = run_quietly([self.program, "image", "inspect", "--format",
                            "{{json .Config.Env}}", image.name])
        try:
            settings = json.loads(done.stdout) if done.returncode == 0 else None
        except ValueError:
            settings = None
        if not isinstance(settings, list):
            return None
        return dict(setting.partition("=")[::2] for setting in settings if "=" in setting)

    def path_origin(self, image: Image) -> str:
        path = (self.image_variables(image) or {}).get("PATH")
        return f"its ENV PATH {path}" if path else \
            f"{self.program}'s default PATH (its config sets no ENV PATH)"


class Podman(Docker):
    name = "podman"
    program = "podman"
    install_hint = "apt-get install podman, and the NVIDIA Container Toolkit's CDI spec for GPUs"
    gpu_flags = ["--device", "nvidia.com/gpu=all"]
    gpu_flags_doc = "--device nvidia.com/gpu=all (CDI, from nvidia-ctk cdi generate)"

    def missing(self, image: Image) -> str | None:
        if Path(image.name).is_dir():
            return root_missing(Path(image.name))
        return super().missing(image)

    def image_options(self, image: Image, env: Mapping[str, str]) -> list[str]:
        root = Path(image.name)
        if not root.is_dir():
            return [image.name]
        # The image's variables where the host sets no such one, as bwrap gives them: an
        # image's defaults, not secrets, so on the command line.
        defaults = root_environment(root)
        return [*(part for name, value in sorted(defaults.items())
                  if name not in passed_variables(env) for part in ("-e", f"{name}={value}")),
                "--rootfs", f"{root.resolve()}:O"]

    def identity(self, image: Image) -> str:
        if Path(image.name).is_dir():
            return root_identity(Path(image.name))
        return super().identity(image)

    def image_variables(self, image: Image) -> dict[str, str] | None:
        if Path(image.name).is_dir():
            return root_environment(Path(image.name))
        return super().image_variables(image)

    def path_origin(self, image: Image) -> str:
        if Path(image.name).is_dir():
            return root_path_origin(Path(image.name))
        return super().path_origin(image)
