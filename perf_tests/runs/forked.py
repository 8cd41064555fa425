"""`python -m <module> <arguments>` forked by the session's fork server, for a launcher that
starts a process itself (torchrun starts its workers, the simulated launcher its torchrun
agents): this process stands for the forked one, which its launcher cannot start. It passes on
the signals it gets, and ends as the forked process ended (its exit code, or the same signal),
so that its launcher sees what it would have seen. Without a fork server (none named in the
environment, or none can fork it), it becomes `python -m <module>` itself.

    python -m perf_tests.runs.forked rn50_model.worker --run-dir run-1 ...
"""
from __future__ import annotations

import os
import signal
import sys

from perf_tests.runs.fork_servers import forked_or_none

PASSED_ON = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)


def forked_command(module: str, arguments: list[str]) -> list[str]:
    """The command that runs `module` forked where the launch names fork servers."""
    return [sys.executable, "-m", "perf_tests.runs.forked", module, *arguments]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print("usage: python -m perf_tests.runs.forked MODULE [ARGUMENTS ...]", file=sys.stderr)
        return 2
    module, arguments = argv[0], argv[1:]
    # Passed on from the start: a signal that came while the server forked (the forked process
    # may already run) is passed on once it has a pid, where it used to end this process alone.
    early: list[int] = []
    forked = None

    def pass_on(signum, frame):
        if forked is None:
            early.append(signum)
        else:
            forked.send_signal(signum)

    for signum in PASSED_ON:
        signal.signal(signum, pass_on)
    forked = forked_or_none(module, arguments, dict(os.environ), "forked")
    if forked is None:
        for signum in early[:1]:   # ended before anything ran: as the signal would have
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
        os.execv(sys.executable, [sys.executable, "-m", module, *arguments])
    for signum in early:
        forked.send_signal(signum)
    code = forked.wait()
    if code < 0:   # end by the same signal, as the forked process did
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


if __name__ == "__main__":
    sys.exit(main())
