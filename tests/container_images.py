"""Real container images for the container tests, built offline from Debian's packages and the
host's own torch wheel, once per machine and kept outside the checkout (keyed by what they
hold), as ../shared/ENVIRONMENT.md records:

- `plain`: `debootstrap --variant=minbase --include=python3,python3-venv bookworm`: Debian's
  Python, no torch (the image a test names for "an image without torch");
- `a`: `plain` with a venv at /opt/venv holding this host's torch and numpy versions, the
  venv first on the image's PATH (its /etc/environment);
- `b`: `a` with one thing changed the way image upgrades change things: its environment file
  sets library defaults that make ResNet50 training slower on any CPU (oneDNN's primitive cache
  off, and ATen's vectorised kernels off).

Each is a folder that bwrap runs (perf_tests/containers/bwrap.py). `b` and `a` share their
files with `plain` through hard links (`cp -al`) where they did not change them; a build goes
into a temporary folder renamed into place at the end, under a lock, so concurrent test
workers build it once.

`make test-setup` builds them beside its package installs (`python3 tests/container_images.py`),
on a core those leave idle: built inside the tests, the build took a core from the tests run two
at a time for about a minute. Where they cannot be built here it says why in one line and exits
0; the container tests then skip with that line.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
RECIPE_VERSION = "2"
SLOW_SETTINGS = {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "0", "ATEN_CPU_CAPABILITY": "default"}
VENV_PATH = "/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class ImagesUnavailable(RuntimeError):
    """The images cannot be built here; the message says what is missing or what failed."""


def images_unavailable() -> str | None:
    """None where this machine can build and run the images, else why (for pytest.skip)."""
    missing = [name for name in ("bwrap", "debootstrap") if shutil.which(
        name, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin") is None]
    if missing:
        return (f"the container tests need {', '.join(missing)}; install them with "
                ".ci/install-launchers.sh (Debian: bubblewrap debootstrap)")
    if os.geteuid() != 0:
        return "debootstrap builds a root filesystem only as root"
    return None


def pinned_packages() -> list[str]:
    """This interpreter's torch and numpy, as pins (a local build's +cpu left to the index)."""
    import numpy
    import torch
    return [f"torch=={torch.__version__.split('+')[0]}", f"numpy=={numpy.__version__}"]


def cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "rn50_perf" / "images"


def run(argv: list[str], what: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip() or done.stdout.strip()).splitlines()[-3:]
        raise ImagesUnavailable(f"{what} failed: {' | '.join(last)}")


def in_root(root: Path, script: str, binds: list[str] = ()) -> None:
    """`script` run by sh inside `root`, written to (a build step, not a test's container)."""
    run(["bwrap", "--bind", str(root), "/", "--proc", "/proc", "--dev", "/dev", *binds,
         "--unshare-pid", "--die-with-parent", "--clearenv", "--setenv", "PATH",
         "/usr/bin:/bin", "--setenv", "HOME", "/root", "sh", "-c", script],
        f"in {root.name}: {script}")


def build_plain(root: Path) -> None:
    run(["debootstrap", "--variant=minbase", "--include=python3,python3-venv", SUITE, str(root),
         MIRROR], "debootstrap")
    # c10d's rendezvous resolves this host's name; minbase has no hosts file to bind over.
    shutil.copy("/etc/hosts", root / "etc" / "hosts")


def build_a(root: Path, wheels: Path) -> None:
    run([sys.executable, "-m", "pip", "download", "--quiet", "--dest", str(wheels),
         *pinned_packages()], "pip download of torch and numpy")
    in_root(root, "python3 -m venv /opt/venv && /opt/venv/bin/pip install --quiet --no-index "
            f"--find-links /wheels {' '.join(pinned_packages())}",
            ["--ro-bind", str(wheels), "/wheels"])
    (root / "wheels").rmdir()
    write_own(root / "etc" / "environment", f"PATH={VENV_PATH}\n")


def build_b(root: Path) -> None:
    environment = root / "etc" / "environment"
    write_own(environment, environment.read_text() + "".join(
        f"{key}={value}\n" for key, value in SLOW_SETTINGS.items()))


def write_own(path: Path, text: str) -> None:
    """`path` with `text`, as a file of this image's own: the hard link it may share with the
    image it was copied from is replaced, never written through."""
    path.unlink(missing_ok=True)
    path.write_text(text)


def key() -> str:
    recipe = "|".join([RECIPE_VERSION, SUITE, *pinned_packages(), repr(SLOW_SETTINGS)])
    return hashlib.sha256(recipe.encode()).hexdigest()[:12]


def built_images() -> dict[str, Path]:
    """The three images' root folders, built where this machine has not built them yet."""
    reason = images_unavailable()
    if reason:
        raise ImagesUnavailable(reason)
    home = cache_root() / key()
    home.mkdir(parents=True, exist_ok=True)
    images = {name: home / name for name in ("plain", "a", "b")}
    with open(home / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for name, parent, build in (("plain", None, build_plain),
                                    ("a", "plain", lambda root: build_a(root, home / "wheels")),
                                    ("b", "a", build_b)):
            if images[name].is_dir():
                continue
            building = home / f"{name}.building"
            shutil.rmtree(building, ignore_errors=True)
            if parent:
                run(["cp", "-al", str(images[parent]), str(building)], f"cp -al {parent}")
            build(building)
            building.rename(images[name])
    return images


def main() -> int:
    import time
    started = time.monotonic()
    try:
        images = built_images()
    except ImagesUnavailable as error:
        print(f"container images not built: {error}; the container tests will skip", flush=True)
        return 0
    print(f"container images {', '.join(sorted(images))} in {cache_root() / key()} "
          f"({time.monotonic() - started:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
