"""What the job's hosts and GPUs were doing during a run's timed window, as the run's record says
it: each host's CPU counters, read by its local rank 0 at the window's edges (host_state.py),
every rank's GPU (gpu_state.py), and why the run is marked (`host_busy`).

No torch import: the readings are files and NVML, the rest is folding them.
"""
from __future__ import annotations

from .gpu_fitness import is_throttling, ranks_unfit_reasons
from .host_state import CpuSnapshot, busy_reasons, host_state


def host_snapshot(placement):
    """The host's CPU counters, read by one process per host (its local rank 0); None on the
    others."""
    return CpuSnapshot.of_this_run() if placement.local_rank == 0 else None


def host_record(placement, before: CpuSnapshot | None, after: CpuSnapshot | None) -> dict | None:
    """This host's state during the window, with its node; None on the ranks that read none."""
    if before is None or after is None:
        return None
    return {**host_state(before, after), "node": placement.node_rank}


def host_busy(host_states: list[dict], gpu_states: list[dict] = ()) -> list[str]:
    """Why the run is marked: what kept the hosts busy during the window, each clause prefixed
    with its host (and node, as simulated nodes share a host) where there are several, then
    what was off on each rank's GPU (gpu_state.unfit_clauses)."""
    several = len(host_states) > 1
    return [f"{state['host']} (node {state['node']}): {reason}" if several else reason
            for state in host_states for reason in busy_reasons(state)
            ] + ranks_unfit_reasons(list(gpu_states))


def window_state(gpu_state: dict, per_rank: list[dict], on_gpu: bool) -> dict:
    """The record's fields on the window's hosts and GPUs, from this rank's GPU state and every
    rank's `gpu_state` and `host_state` (rank order): a GPU throttling on any rank slows the
    whole job, so every rank's is kept and judged; each host's state comes from its local rank
    0. Without GPUs there are no GPU states to keep."""
    host_states = [values["host_state"] for values in per_rank if values["host_state"]]
    gpu_states = [values["gpu_state"] for values in per_rank] if on_gpu else []
    return {
        "gpu_state_during_window": gpu_state or None,
        "gpu_state_per_rank": gpu_states or None,
        "throttled_ranks": [rank for rank, state in enumerate(gpu_states) if is_throttling(state)],
        "throttled": any(is_throttling(state) for state in gpu_states),
        "host_state": host_states,
        "host_busy": host_busy(host_states, gpu_states),
    }
