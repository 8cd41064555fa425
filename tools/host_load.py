"""Run a command on a host made unfit on purpose: busy loops beside it, all the time or in a
period, or a CPU quota over it. For trying the gate's host-state marks and the host-unfit
verdict for real (tests/test_host_unfit_sessions.py, `rn50-perf calibrate`'s periodic-hog scenario):
the load is real processes burning CPU, the quota a real cgroup.

    rn50-perf host-load --loops 2 -- python3 -m pytest perf_tests -k 1n1g_fp32
    rn50-perf host-load --loops 1 --on 10 --off 20 -- python3 -m pytest perf_tests
    rn50-perf host-load --cpu-quota 0.5 -- python3 -m pytest perf_tests -k 1n1g_fp32

The loops start before the command and end with it (`--on`/`--off`: each loop runs for ON
seconds, then is stopped for OFF seconds, over and over); the quota (in cores, cgroup v2's
cpu.max or v1's cfs quota, in a new cgroup under the CPU controller's mount, root only) holds
the command and everything it starts, and the cgroup is removed afterwards. The exit status is
the command's; a host that cannot take a quota says so in one line, exit status 2.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from tools import moved_line
from tools.cli import OneLineParser
from tools.command import verb_command

PROG = verb_command("host-load")
CGROUP_ROOT = Path("/sys/fs/cgroup")
PERIOD_US = 100_000
PR_SET_PDEATHSIG = 1
STOP_GRACE_S = 60
BUSY_LOOP = "while True:\n    pass\n"


class QuotaError(Exception):
    """No cgroup with a CPU quota can be made here; one line to act on."""


def cpu_controller() -> tuple[Path, str]:
    """(the folder new cgroups go in, 'v2' or 'v1') for the CPU controller."""
    unified = CGROUP_ROOT / "cgroup.controllers"
    if unified.exists() and "cpu" in unified.read_text().split():
        return CGROUP_ROOT, "v2"
    for mount in ("cpu,cpuacct", "cpu"):
        if (CGROUP_ROOT / mount / "cpu.cfs_quota_us").exists():
            return CGROUP_ROOT / mount, "v1"
    raise QuotaError("no cgroup CPU controller is mounted under /sys/fs/cgroup (neither v2 "
                     "with cpu nor v1's cpu): run without --cpu-quota")


@contextmanager
def quota_cgroup(cores: float):
    """A new cgroup allowing `cores` CPUs' worth of time, removed at the end."""
    parent, version = cpu_controller()
    folder = parent / f"rn50-host-load-{os.getpid()}"
    if version == "v2":   # the cpu controller, enabled for the root's children (often is)
        try:
            (parent / "cgroup.subtree_control").write_text("+cpu\n")
        except OSError:
            pass          # then cpu.max below is missing, and the line says so
    try:
        folder.mkdir()
        if version == "v2":
            (folder / "cpu.max").write_text(f"{round(cores * PERIOD_US)} {PERIOD_US}\n")
        else:
            (folder / "cpu.cfs_period_us").write_text(f"{PERIOD_US}\n")
            (folder / "cpu.cfs_quota_us").write_text(f"{round(cores * PERIOD_US)}\n")
    except OSError as error:
        if folder.exists():
            folder.rmdir()
        raise QuotaError(f"cannot make a cgroup with a CPU quota in {parent} "
                         f"({error.strerror}): run as root, or without --cpu-quota") from None
    try:
        yield folder
    finally:
        for _ in range(50):   # the command's last processes may still be leaving
            try:
                folder.rmdir()
                break
            except OSError:
                time.sleep(0.1)


def die_with_parent() -> None:
    """In a loop's process, before it starts: killed when this tool dies, however it dies
    (prctl PR_SET_PDEATHSIG), so no loop outlives it to mark later runs."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def start_loops(count: int) -> list[subprocess.Popen]:
    # Their own session: the terminal's Ctrl-C reaches the command, not them.
    return [subprocess.Popen([sys.executable, "-c", BUSY_LOOP], start_new_session=True,
                             preexec_fn=die_with_parent) for _ in range(count)]


def stop_loops(loops: list[subprocess.Popen]) -> None:
    for loop in loops:
        loop.kill()
        loop.wait()


def cycle(loops: list[subprocess.Popen], command: subprocess.Popen, on: float,
          off: float) -> None:
    """Run the loops ON seconds, stop them OFF seconds, until the command ends."""
    while command.poll() is None:
        for pause, resume in ((on, signal.SIGSTOP), (off, signal.SIGCONT)):
            try:
                command.wait(pause)
                return
            except subprocess.TimeoutExpired:
                for loop in loops:
                    loop.send_signal(resume)


def run(command: list[str], loops: int = 0, on: float | None = None, off: float | None = None,
        cpu_quota: float | None = None) -> int:
    """The command's exit status, with the load around it."""
    @contextmanager
    def quota():
        if cpu_quota is None:
            yield None
        else:
            with quota_cgroup(cpu_quota) as folder:
                yield folder

    with quota() as folder:
        def join_cgroup() -> None:  # in the child, before it runs the command
            (folder / "cgroup.procs").write_text(f"{os.getpid()}\n")

        busy = start_loops(loops)
        try:
            try:
                started = subprocess.Popen(command, preexec_fn=join_cgroup if folder else None)
            except subprocess.SubprocessError as error:
                raise QuotaError(f"cannot run the command in the cgroup {folder} ({error}): "
                                 "run as root, or without --cpu-quota") from None
            try:
                if busy and on is not None:
                    cycle(busy, started, on, off)
                return started.wait()
            except KeyboardInterrupt:
                # Ctrl-C reached the command too; a SIGTERM or SIGHUP here did not: pass one
                # on (the suite ends its runs on it), and kill it if it does not end.
                started.send_signal(signal.SIGTERM)
                try:
                    return started.wait(STOP_GRACE_S)
                except subprocess.TimeoutExpired:
                    started.kill()
                    return started.wait()
        finally:
            stop_loops(busy)


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--loops", type=int, default=0,
                        help="busy-looping processes beside the command (default 0)")
    parser.add_argument("--on", type=float, help="seconds the loops run in each period "
                                                 "(default: all the time)")
    parser.add_argument("--off", type=float, help="seconds the loops are stopped in each period")
    parser.add_argument("--cpu-quota", type=float, metavar="CORES",
                        help="hold the command to this many cores' worth of CPU time")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    if args.loops < 0 or (args.on is None) != (args.off is None) or (
            args.on is not None and (args.on <= 0 or args.off <= 0)):
        parser.error("--loops is a count from 0; --on and --off go together, in seconds "
                     "above 0")
    if args.cpu_quota is not None and args.cpu_quota <= 0:
        parser.error("--cpu-quota is a number of cores above 0, e.g. 0.5")
    # SIGTERM or SIGHUP (a CI job's timeout, a closed terminal) end it as Ctrl-C does: the
    # command is told, and the loops and the cgroup go.
    for stop in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(stop, signal.default_int_handler)
    try:
        return run(command, args.loops, args.on, args.off, args.cpu_quota)
    except QuotaError as error:
        parser.exit(2, f"{PROG}: {error}\n")


if __name__ == "__main__":
    raise SystemExit(moved_line("host_load"))
