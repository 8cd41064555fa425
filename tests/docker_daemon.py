"""A private docker daemon for the docker tests: Debian's dockerd with its own data root, exec root,
pid file and socket in one temporary folder, reached through DOCKER_HOST; the machine's own
daemon and /var/run/docker.sock are never touched. It holds the test images, made from the root
folder of image `a` that tests/container_images.py builds (`docker import`), the others as
layers over it (`docker commit`):

- `rn50-a:test`: image `a`, its /etc/environment's PATH as the image's ENV (docker reads no
  /etc/environment);
- `rn50-b:test`: `a` with SLOW_SETTINGS in its ENV, as an upgraded image's defaults, and one
  Debian package more (MARKER_PACKAGE, built and installed inside with dpkg), as an upgrade
  brings; and the worker's fault knob at half speed in its ENV (SLOWER), a slowdown large on any
  CPU: SLOW_SETTINGS alone cost 17-27% under docker here, too little to see past a loaded
  host's noise in two runs or six pairs (bwrap's `b` sets both too);
- `rn50-notorch:test`: `a` with torch removed (a layer of deletions): an image without torch.

`dockerd --iptables=false --bridge=none` starts without privileged flags (the containers use the
host's network); the storage driver is overlay2, where this kernel mounts overlays, else vfs,
which copies the image for every container. Its data root is a tmpfs of its own (up to
DATA_ROOT_SIZE; a folder on disk where none can be mounted): importing `a` wrote 1.2 GB, which
took 24 s on this VM's disk and 27 s more to delete, against 13 s and 0.4 s in memory. `stop()`
removes every container, ends the daemon by its pid (it ends the containerd it started),
unmounts the data root and removes the folder: nothing is left behind.

    with DockerDaemon(folder) as daemon:
        subprocess.run(["docker", "ps"], env={**os.environ, **daemon.env})
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from container_images import SLOW_SETTINGS, SLOWER
from perf_tests.containers.runtime import DEFAULT_PATH, root_environment

SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
INSTALL_HINT = "install it with .ci/install-launchers.sh (Debian: docker.io)"
START_TIMEOUT_SECONDS = 60
STOP_GRACE_SECONDS = 20
IMAGES = {"a": "rn50-a:test", "b": "rn50-b:test", "notorch": "rn50-notorch:test"}
DATA_ROOT_SIZE = "3g"
# The Debian package image `b` has and `a` has not: built in the container from this control file.
MARKER_PACKAGE = ("rn50-upgrade-marker", "1.0")
MARKER_CONTROL = (f"Package: {MARKER_PACKAGE[0]}\nVersion: {MARKER_PACKAGE[1]}\n"
                  "Architecture: all\nMaintainer: rn50-perf tests <tests@localhost>\n"
                  "Description: one package more, as an image upgrade brings\n")


class DockerUnavailable(RuntimeError):
    """The daemon could not be started: its own last lines."""


def docker_available() -> str | None:
    """None where this machine can run the daemon, else why (for pytest.skip)."""
    missing = [name for name in ("dockerd", "docker", "containerd")
               if shutil.which(name, path=SEARCH_PATH) is None]
    if missing:
        return f"the docker tests need {', '.join(missing)}, not found on PATH; {INSTALL_HINT}"
    if os.geteuid() != 0:
        return "the docker tests start a docker daemon, which runs as root"
    return None


class DockerDaemon:
    def __init__(self) -> None:
        # Short: the daemon's and containerd's unix sockets live under it.
        self.root = Path(tempfile.mkdtemp(prefix="rn50-docker-", dir="/tmp"))
        self.socket = self.root / "docker.sock"
        self.env = {"DOCKER_HOST": f"unix://{self.socket}",
                    "DOCKER_CONFIG": str(self.root / "config")}
        self.process: subprocess.Popen | None = None
        self.storage_driver = ""

    def __enter__(self) -> "DockerDaemon":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def docker(self, *arguments: str, stdin=None, check: bool = True,
               timeout: float = 300) -> subprocess.CompletedProcess:
        done = subprocess.run(["docker", *arguments], env={**os.environ, **self.env},
                              stdin=stdin, capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise DockerUnavailable(f"docker {' '.join(arguments[:3])} failed: "
                                    f"{done.stderr.strip()[-500:]}")
        return done

    def start(self) -> None:
        """dockerd on overlay2, else vfs; DockerUnavailable with its log's tail where neither
        answers."""
        data = self.root / "data"
        data.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DATA_ROOT_SIZE},mode=0700",
                        "rn50-docker", str(data)], capture_output=True)   # else on disk
        for driver in ("overlay2", "vfs"):
            log = self.root / f"dockerd-{driver}.log"
            with open(log, "wb") as output:
                self.process = subprocess.Popen(
                    ["dockerd", "--iptables=false", "--ip-masq=false", "--bridge=none",
                     f"--storage-driver={driver}", "--data-root", str(self.root / "data"),
                     "--exec-root", str(self.root / "exec"), "--pidfile",
                     str(self.root / "dockerd.pid"), "-H", self.env["DOCKER_HOST"],
                     "--log-level=warn"], stdout=output, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL, start_new_session=True,
                    env={**os.environ, "PATH": SEARCH_PATH})
            deadline = time.monotonic() + START_TIMEOUT_SECONDS
            while time.monotonic() < deadline and self.process.poll() is None:
                if self.docker("version", check=False, timeout=30).returncode == 0:
                    self.storage_driver = driver
                    return
                time.sleep(0.5)
            self.end_daemon()
        lines = (self.root / "dockerd-vfs.log").read_text(errors="replace").strip().splitlines()
        raise DockerUnavailable("dockerd did not start: " + " | ".join(lines[-3:]))

    def import_images(self, root: Path) -> dict[str, str]:
        """The test images (IMAGES) from the root folder `root` of image `a`."""
        path = root_environment(root).get("PATH", DEFAULT_PATH)
        self.import_root(root, IMAGES["a"], [f"ENV PATH={path}"])
        self.commit(IMAGES["b"], f"mkdir -p /tmp/p/DEBIAN && printf '%s' '{MARKER_CONTROL}' > "
                    "/tmp/p/DEBIAN/control && dpkg-deb --build /tmp/p /tmp/p.deb >/dev/null && "
                    "dpkg -i /tmp/p.deb >/dev/null && rm -r /tmp/p /tmp/p.deb",
                    [f"ENV {key}={value}" for key, value in sorted(SLOW_SETTINGS.items())]
                    + [f"ENV {SLOWER}"])
        self.commit(IMAGES["notorch"], "rm -r /opt/venv/lib/python3*/site-packages/torch")
        return dict(IMAGES)

    def import_root(self, root: Path, name: str, changes: list[str]) -> None:
        tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
        try:
            self.docker("import", *(part for change in changes for part in ("--change", change)),
                        "-", name, stdin=tar.stdout)
        finally:
            tar.stdout.close()
            tar.wait()

    def commit(self, name: str, script: str, changes: list[str] = ()) -> None:
        """`name`: what a container of `a` made of it by running `script`, with `changes`."""
        container = self.docker("create", "--network", "none", IMAGES["a"], "sh", "-c",
                                script).stdout.strip()
        try:
            self.docker("start", "-a", container)
            self.docker("commit", *(part for change in changes for part in ("--change", change)),
                        container, name)
        finally:
            self.docker("rm", "-f", container, check=False)

    def containers(self) -> list[str]:
        """Every container the daemon has, running or not: `<id> <labels>`."""
        done = self.docker("ps", "-a", "--format", "{{.ID}} {{.Labels}}", check=False)
        return done.stdout.split("\n")[:-1]

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            listed = self.docker("ps", "-aq", check=False, timeout=60).stdout.split()
            if listed:
                self.docker("rm", "-f", *listed, check=False, timeout=120)
        self.end_daemon()
        # What the daemon leaves mounted (its network namespace's file, exec/netns/default),
        # and the data root's tmpfs: the deepest first.
        for mount in sorted(mounts_under(self.root), reverse=True):
            subprocess.run(["umount", mount], capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)

    def end_daemon(self) -> None:
        """SIGTERM to dockerd (it ends its containerd), SIGKILL to its group after the grace."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=STOP_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.process.pid, signal.SIGKILL)   # a containerd left behind
        except (ProcessLookupError, PermissionError):
            pass
        self.process.wait()
        self.process = None


def mounts_under(folder: Path) -> list[str]:
    """The mount points under `folder` (/proc/mounts escapes a space as \\040)."""
    with open("/proc/mounts") as mounts:
        points = [line.split()[1].replace("\\040", " ") for line in mounts]
    return [point for point in points if point.startswith(f"{folder}/")]
