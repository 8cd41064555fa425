"""Real container images for the container tests, built offline from Debian's packages and the
host's own torch wheel, once per machine and kept outside the checkout (keyed by what they
hold), as ../shared/ENVIRONMENT.md records:

- `plain`: `debootstrap --variant=minbase --include=python3,python3-venv bookworm`: Debian's
  Python, no torch (the image a test names for "an image without torch");
- `a`: `plain` with a venv at /opt/venv holding this host's torch and numpy versions, the
  venv first on the image's PATH (its /etc/environment);
- `b`: `a` with one thing changed the way image upgrades change things: its environment file
  sets library defaults that make ResNet50 training slower (oneDNN's primitive cache off, and
  ATen's vectorised kernels off: 17-27% here, too little to see past a loaded host's noise in
  two runs: a gate in `b` once measured one of its runs as fast as `a`'s), and the worker's
  fault knob at half speed (SLOWER), a slowdown large on any CPU;
- `nohosts`: `a` without /etc/hosts, as debootstrap's minbase leaves a root (the suite's bwrap
  gives it the host's).

Each is a folder that bwrap runs (perf_tests/containers/bwrap.py). `b` and `a` share their
files with `plain` through hard links (`cp -al`) where they did not change them; a build goes
into a temporary folder renamed into place at the end, under its folder's lock, so concurrent
test workers build it once. `plain` is keyed by its recipe alone and needs no torch; `a`, `b`
and `nohosts` also by the torch and numpy they hold. Once built, each image's identity (a hash
of every file, perf_tests/containers/root_contents.py) is computed into the cache under
`~/.cache/rn50_perf/root-contents/`, so that no test session pays the first reading of 1.3 GB;
the container tests point their sessions' cache there (XDG_CACHE_HOME).

`make test-setup` builds them beside its package installs, on the core those leave idle:
`python3 tests/container_images.py --plain` (debootstrap, about 35 s of a core) from its start,
before torch is installed, then `python3 tests/container_images.py` (the venv with torch) once
it is. Built inside the tests, the build took a core from the tests run two at a time for about
a minute. Where they cannot be built here it says why in one line and exits 0; the container
tests then skip with that line.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
RECIPE_VERSION = "2"
SLOW_SETTINGS = {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "0", "ATEN_CPU_CAPABILITY": "default"}
SLOWER = "RN50_FAULT=slow@share=0.5"   # rn50_model/faults.py: every step takes twice as long
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
    # gloo looks up this host's name; minbase has no hosts file to bind over.
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
        f"{key}={value}\n" for key, value in SLOW_SETTINGS.items()) + f"{SLOWER}\n")


def build_nohosts(root: Path) -> None:
    (root / "etc" / "hosts").unlink()   # the link only: `a`'s file stays


def write_own(path: Path, text: str) -> None:
    """`path` with `text`, as a file of this image's own: the hard link it may share with the
    image it was copied from is replaced, never written through."""
    path.unlink(missing_ok=True)
    path.write_text(text)


def recipe_key(*parts: str) -> str:
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:12]


def build_in(home: Path, steps: list[tuple[str, Path | None, Callable[[Path], None]]]) -> None:
    """Each (name, parent, build) of `steps` that `home` lacks: `build` run on a folder of its
    own (a hard-linked copy of `parent` where one is named), renamed into place when done, all
    under home's lock."""
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for name, parent, build in steps:
            if (home / name).is_dir():
                continue
            building = home / f"{name}.building"
            shutil.rmtree(building, ignore_errors=True)
            if parent:
                run(["cp", "-al", str(parent), str(building)], f"cp -al {parent.name}")
            build(building)
            building.rename(home / name)


def plain_image() -> Path:
    """The `plain` image's root folder, built where this machine has not built it yet."""
    reason = images_unavailable()
    if reason:
        raise ImagesUnavailable(reason)
    home = cache_root() / f"plain-{recipe_key(RECIPE_VERSION, SUITE, MIRROR)}"
    build_in(home, [("plain", None, build_plain)])
    return home / "plain"


def built_images() -> dict[str, Path]:
    """The three images' root folders, built where this machine has not built them yet."""
    plain = plain_image()
    home = cache_root() / recipe_key(plain.parent.name, *pinned_packages(), repr(SLOW_SETTINGS),
                                     SLOWER)
    build_in(home, [("a", plain, lambda root: build_a(root, home / "wheels")),
                    ("b", home / "a", build_b), ("nohosts", home / "a", build_nohosts)])
    return {"plain": plain, **{name: home / name for name in ("a", "b", "nohosts")}}


def cache_home() -> Path:
    """The XDG cache folder the images and their identities are kept in: what a test's
    session (whose HOME is its own folder) is given as XDG_CACHE_HOME."""
    return cache_root().parent.parent


def identified(images: dict[str, Path]) -> dict[str, str]:
    """Each image's identity, computed into the cache where it is not there yet (`plain`'s
    too, where it is among them)."""
    from perf_tests.containers.runtime import root_identity
    return {name: root_identity(root) for name, root in images.items()}


def main(argv: list[str]) -> int:
    """`--plain`: only the image that needs no torch."""
    import time
    if argv not in ([], ["--plain"]):
        print(f"usage: python3 tests/container_images.py [--plain] (not {' '.join(argv)})",
              file=sys.stderr)
        return 2
    started = time.monotonic()
    try:
        images = {"plain": plain_image()} if argv == ["--plain"] else built_images()
    except ImagesUnavailable as error:
        print(f"container images not built: {error}; the container tests will skip", flush=True)
        return 0
    # Debian's root (--plain) is built before the project is installed; no session reads its
    # identity (an image without torch fails its probe first).
    identities = {} if argv == ["--plain"] else identified(images)
    print(f"container images ready in {time.monotonic() - started:.0f} s: " + ", ".join(
        f"{name} {root}" + (f" ({identities[name]})" if name in identities else "")
        for name, root in sorted(images.items())), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
