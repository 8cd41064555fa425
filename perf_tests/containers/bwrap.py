"""bubblewrap: an image is a root filesystem folder (debootstrap's, an unpacked image).

The container's root is bwrap's own tmpfs; each top-level entry of the image is bound there
read-only (its symbolic links made again), so a session's folder at any path can be mounted:
where one lies inside an image folder that lacks it, that folder is bound entry by entry
instead, and the missing part made on the tmpfs. /proc, /dev, a private /tmp, the host's
/dev/shm, /sys and /etc/hosts (gloo looks its interface up by the host's name; made where the
image has none) come from the host as with any container; the network and the process ids are
the host's. The image's variables are its `/etc/environment` (KEY=VALUE lines, as enroot and pam
read it): they apply where the host does not set the same variable, and PATH is the image's
(else Debian's default).
"""
from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from perf_tests.containers.runtime import (DEFAULT_PATH, HOST_ONLY_VARIABLES, Image, Runtime,
                                           root_environment, root_identity, root_missing,
                                           root_path_origin, unique_paths)

# Mounted by bwrap itself, never bound from the image.
OWN_MOUNTS = ("proc", "dev", "sys", "tmp")
NVIDIA_LIBRARIES = ("libcuda.so", "libnvidia-", "libnvcuvid.so")
NVIDIA_TARGET = "/host-nvidia"   # made on the container's tmpfs root
HOSTS = Path("/etc/hosts")   # the host's, in every container: gloo looks up the host's name


def bind_image(root: Path, inside: Path, needed: list[Path]) -> list[str]:
    """bwrap options that show `root/inside` at `/inside`, read-only: whole where no `needed`
    path lies under it, else entry by entry, so that the needed ones can be made."""
    source = root / inside.relative_to("/")
    if not any(path.is_relative_to(inside) and path != inside for path in needed) \
            or not source.is_dir() or source.is_symlink():
        if source.is_symlink():
            return ["--symlink", os.readlink(source), str(inside)]
        return ["--ro-bind", str(source), str(inside)]
    options = ["--dir", str(inside)] if inside != Path("/") else []
    for entry in sorted(source.iterdir()):
        if inside == Path("/") and entry.name in OWN_MOUNTS:
            continue
        options += bind_image(root, inside / entry.name, needed)
    return options


def gpu_options() -> list[str]:
    """The host's NVIDIA device nodes and its driver's libraries (from the loader's cache),
    the libraries under NVIDIA_TARGET on the library path, as NVIDIA's container hooks do."""
    options = []
    for node in sorted(Path("/dev").glob("nvidia*")):
        options += ["--dev-bind", str(node), str(node)]
    try:
        cache = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    except OSError:
        cache = ""
    libraries = {line.rsplit("=>", 1)[1].strip() for line in cache.splitlines()
                 if "=>" in line and line.strip().startswith(NVIDIA_LIBRARIES)}
    for library in sorted(libraries):
        options += ["--ro-bind", library, f"{NVIDIA_TARGET}/{Path(library).name}"]
    return options


class Bwrap(Runtime):
    name = "bwrap"
    program = "bwrap"
    install_hint = "apt-get install bubblewrap"
    gpu_flags_doc = ("each /dev/nvidia* node with --dev-bind, the driver's libraries bound under "
                     f"{NVIDIA_TARGET} and put on LD_LIBRARY_PATH")

    def can_run(self, image_name: str) -> bool:
        return Path(image_name).is_dir()

    def missing(self, image: Image) -> str | None:
        return root_missing(Path(image.name))

    def command(self, image: Image, mounts: Sequence[Path], workdir: Path,
                env: Mapping[str, str], gpus: bool, label: str = "") -> list[str]:
        root = Path(image.name).resolve()
        needed = [Path(path).resolve() for path in (*mounts, workdir)]
        if not (root / "etc" / "hosts").exists():
            # Made on the tmpfs root: an image without one (debootstrap's minbase) resolves
            # no host name, and gloo then falls back to the loopback interface with a warning.
            needed.append(HOSTS)
        argv = ["bwrap", *bind_image(root, Path("/"), needed),
                "--proc", "/proc", "--dev", "/dev", "--bind", "/dev/shm", "/dev/shm",
                "--ro-bind", "/sys", "/sys", "--tmpfs", "/tmp", "--ro-bind", str(HOSTS),
                str(HOSTS)]
        for path in unique_paths(mounts):
            argv += ["--bind", str(path), str(path)]
        # The host's process ids: a node's host probe tells the run's own processes, in every
        # node's container, from the others' by their token in the host's /proc
        # (rn50_model/host_state.py).
        argv += ["--chdir", str(Path(workdir).resolve()), "--die-with-parent"]
        variables = root_environment(root)
        for name in sorted(HOST_ONLY_VARIABLES & set(env)):
            argv += ["--unsetenv", name]
        argv += ["--setenv", "PATH", variables.pop("PATH", DEFAULT_PATH)]
        for name, value in sorted(variables.items()):
            if name not in env or name in HOST_ONLY_VARIABLES:
                argv += ["--setenv", name, value]
        if gpus:
            argv += [*gpu_options(), "--setenv", "LD_LIBRARY_PATH",
                     ":".join(filter(None, [NVIDIA_TARGET, variables.get("LD_LIBRARY_PATH")]))]
        return argv

    def identity(self, image: Image) -> str:
        return root_identity(Path(image.name))

    def image_variables(self, image: Image) -> dict[str, str]:
        return root_environment(Path(image.name))

    def path_origin(self, image: Image) -> str:
        return root_path_origin(Path(image.name))

