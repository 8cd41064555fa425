"""The fault knob: `RN50_FAULT` makes a worker fail, hang, slow down, grow or diverge for real, so
the harness is tested against real failures rather than stand-ins (tests/test_faults.py).
"""
from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass

import torch

FAULT_VARIABLE = "RN50_FAULT"


@dataclass(frozen=True)
class Fault:
    """A fault to inject, for testing the harness with real failures:
    `RN50_FAULT=kind@rank=R,iter=I[,batch=B]` (batch: only in runs of that batch size).

    kinds: `raise` (an exception), `kill` (SIGKILL to itself), `stop` (SIGSTOP: a hung rank),
    `oom` (a real allocation far beyond memory), `slow@share=S`: every step of every rank
    is followed by an idle wait of S / (1 - S) times that step's own duration, so the throughput
    is (1 - S) times what the same steps give without it, however fast the host runs at the
    time (a slowdown of known size for calibrating comparisons; rank and iter do not apply), and
    `grow@mib=N`: every rank holds N MiB more on its training device, written to, from the end
    of warm-up through the timed window, as a leak or a larger workspace in a new release would
    (a memory growth of known size for the memory gate; rank and iter do not apply), and
    `diverge@iter=I,times=F`: from iteration I on, that rank trains at F times the recipe's
    learning rate, as a wrong LR scaling would (a training step that diverges for real, for the
    path check's loss rule).
    """
    kind: str
    rank: int
    iteration: int
    batch: int | None = None
    share: float = 0.0
    mib: int = 0
    times: float = 0.0

    KINDS = ("raise", "kill", "stop", "oom", "slow", "grow", "diverge")

    @classmethod
    def from_environment(cls, batch_per_device: int | None = None) -> "Fault | None":
        """The fault `RN50_FAULT` asks for; with `batch_per_device`, None where it asks for it in
        runs of another batch size."""
        spec = os.environ.get(FAULT_VARIABLE)
        if not spec:
            return None
        try:
            kind, _, where = spec.partition("@")
            fields = dict(part.split("=", 1) for part in where.split(",") if part)
            batch = fields.get("batch")
            fault = cls(kind=kind, rank=int(fields.get("rank", 0)),
                        iteration=int(fields.get("iter", 0)),
                        batch=int(batch) if batch is not None else None,
                        share=float(fields.get("share", 0.0)), mib=int(fields.get("mib", 0)),
                        times=float(fields.get("times", 0.0)))
        except ValueError:
            raise SystemExit(f"{FAULT_VARIABLE}={spec!r} does not parse; use "
                             "kind@rank=R,iter=I[,batch=B], slow@share=S, grow@mib=N or "
                             "diverge@iter=I,times=F") from None
        if fault.kind not in cls.KINDS:
            raise SystemExit(f"{FAULT_VARIABLE} kind {kind!r} is not one of {', '.join(cls.KINDS)}")
        if (fault.kind == "slow") != (0.0 < fault.share < 1.0):
            raise SystemExit(f"{FAULT_VARIABLE}={spec!r}: share=S (0 < S < 1) goes with slow "
                             "and only with it, e.g. slow@share=0.1")
        if (fault.kind == "grow") != (fault.mib > 0):
            raise SystemExit(f"{FAULT_VARIABLE}={spec!r}: mib=N (N > 0) goes with grow and "
                             "only with it, e.g. grow@mib=200")
        if (fault.kind == "diverge") != (fault.times > 1.0):
            raise SystemExit(f"{FAULT_VARIABLE}={spec!r}: times=F (F > 1) goes with diverge and "
                             "only with it, e.g. diverge@iter=1,times=1000")
        if batch_per_device is not None and fault.batch not in (None, batch_per_device):
            return None
        return fault

    def held_memory(self, device):
        """`grow`'s N MiB on `device`, every page written (an untouched allocation would not
        count in a CPU's resident set), to be kept until the window ends; None otherwise."""
        if self.kind != "grow":
            return None
        return torch.ones(self.mib << 20, dtype=torch.uint8, device=device)

    def stretch(self, step_seconds: float) -> None:
        """After a step of `step_seconds`: the idle wait that makes it cost 1 / (1 - share)."""
        if self.kind == "slow":
            time.sleep(step_seconds * self.share / (1.0 - self.share))

    def trigger(self, rank: int, iteration: int, device=None, optimizer=None) -> None:
        if rank != self.rank or iteration != self.iteration:
            return
        if self.kind == "diverge":
            for group in optimizer.param_groups:
                group["lr"] *= self.times
        if self.kind == "raise":
            raise RuntimeError(f"injected fault on rank {rank} at iteration {iteration}")
        if self.kind == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if self.kind == "stop":
            os.kill(os.getpid(), signal.SIGSTOP)
        if self.kind == "oom":
            # On the training device: a CUDA run must meet the CUDA allocator's own error.
            torch.empty(1 << 50, dtype=torch.uint8, device=device)
