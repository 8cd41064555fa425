"""Stopping on a CI runner's signals as on Ctrl-C: a runner that cancels or times out a job sends
SIGTERM (a closed terminal, SIGHUP); raised as KeyboardInterrupt, it ends the session the way
Ctrl-C does, so every launched process tree is ended and the finished runs are kept. Used by
the plugin and by the long-running tools."""
from __future__ import annotations

import signal
import threading

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def stop_on_signals() -> dict:
    """SIGTERM and SIGHUP raise KeyboardInterrupt where nobody else handles them; returns the
    handlers to put back."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    replaced = {}
    for signum in STOP_SIGNALS:
        if signal.getsignal(signum) is signal.SIG_DFL:
            replaced[signum] = signal.signal(signum, _interrupt)
    return replaced


def _interrupt(signum: int, frame) -> None:
    raise KeyboardInterrupt(f"pytest received {signal.Signals(signum).name}")
