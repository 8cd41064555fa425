"""Stopping on a CI runner's signals as on Ctrl-C: a runner that cancels or times out a job sends
SIGTERM (a closed terminal, SIGHUP); raised as KeyboardInterrupt, it ends the session the way
Ctrl-C does, so every launched process tree is ended and the finished runs are kept. Used by
the plugin and by the long-running tools.

A KeyboardInterrupt that Python raises while a finalizer runs (a `Popen.__del__` between two
runs) is printed as 'Exception ignored' and lost: the session would go on measuring. So the
handlers also note the signal, and the loops that wait on workers call `raise_if_stopped`,
which raises it again."""
from __future__ import annotations

import signal
import threading

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_received: list[str] = []


def stop_on_signals() -> dict:
    """SIGINT, SIGTERM and SIGHUP raise KeyboardInterrupt (and are noted) where nobody else
    handles them (SIGINT: where Python's own handler is in place); returns the handlers to put
    back."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    _received.clear()
    replaced = {}
    for signum in STOP_SIGNALS:
        if signal.getsignal(signum) in (signal.SIG_DFL, signal.default_int_handler):
            replaced[signum] = signal.signal(signum, _interrupt)
    return replaced


def raise_if_stopped() -> None:
    """KeyboardInterrupt where a stop signal came since `stop_on_signals`, raised or not."""
    if _received:
        raise KeyboardInterrupt(f"pytest received {_received[-1]}")


def _interrupt(signum: int, frame) -> None:
    _received.append(signal.Signals(signum).name)
    raise KeyboardInterrupt(f"pytest received {_received[-1]}")
