"""A throughput run on one rank: W warm-up iterations, then M timed iterations, and the run's
record.

The timed window opens after a barrier and closes with a device synchronize on every rank; the
slowest rank's window decides the global throughput. The peak memory is counted from the end of
warm-up; the hosts' and GPUs' state is read at the window's edges (run_state.py, gpu_state.py),
and the interconnect probe runs once every rank's window is gathered (interconnect.py). With
`config.profile_iters` the run is a profiled one instead (op_profile.py).
"""
from __future__ import annotations

import contextlib
import resource
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from .data import Shard, build_batches
from .environment import collect_environment
from .faults import Fault
from .gpu_energy import run_energy
from .gpu_state import gpu_state_sampler
from .interconnect import model_probe, probe_figures
from .op_profile import profiled_run
from .run_clock import RunClock
from .run_state import host_record, host_snapshot, window_state
from .startup import Placement, barrier, record_header, start_worker, synchronizer
from .training import Trainer


@dataclass(frozen=True)
class Window:
    """The timed window as this rank saw it: the time of each iteration (the device's own time)
    and this rank's figures (`elapsed`, `peak_memory`, `gpu_state`, `energy`, `host_state`),
    then every rank's, in rank order."""
    iteration_times: list[float]
    own: dict
    per_rank: list[dict]


def measure(config, placement: Placement, fault: Fault | None = None,
            run_dir: Path | None = None, clock: RunClock | None = None) -> dict:
    """Run W + M iterations and return rank 0's view of the run (every rank returns one); with
    `config.profile_iters`, W + N profiled iterations instead (see `profiled_run`). `clock`
    takes the marks of the run's phases (run_clock.py)."""
    clock = clock or RunClock()
    device, threads = start_worker(config, placement)
    clock.mark("started")
    batches = build_batches(config, device, Shard(placement.rank, placement.world_size,
                                                  placement.local_rank), threads)
    trainer = Trainer(config, device, world_size=placement.world_size,
                      distributed=placement.world_size > 1)
    synchronize = synchronizer(device)
    clock.mark("built")

    # Every step's loss, kept as a copy (a CUDA graph replay overwrites its loss tensor) and read
    # once the window is closed, so the window has no host sync: the path check fails a step
    # that diverges at any iteration, not only one whose last loss is not finite.
    losses = []

    def train_step(iteration: int):
        if fault:
            fault.trigger(placement.rank, iteration, device, trainer.optimizer)
        started = time.perf_counter()
        loss = trainer.step(*next(batches))
        if fault and fault.kind == "slow":
            synchronize()  # the step's own duration, not the time to queue it on a GPU
            fault.stretch(time.perf_counter() - started)
        losses.append(loss.clone())
        return loss

    for iteration in range(config.warmup_iters):
        train_step(iteration)
        if iteration == 0:
            synchronize()   # outside the window: the first step's own time, for the marks
            clock.mark("first_step")
    reset_peak_memory(device)
    held = fault.held_memory(device) if fault else None  # noqa: F841 (held through the window)
    if config.cuda_graphs:
        trainer.capture_cuda_graph(*next(batches))
    synchronize()
    clock.mark("warmed")
    if config.profile_iters:
        return profiled_run(config, placement, device, train_step, synchronize,
                            Path(run_dir or "."))
    window = timed_window(config, placement, device, train_step, synchronize, clock)
    interconnect = model_probe(config, trainer.model, device, synchronize)
    record = window_record(config, placement, device, threads, window, losses, interconnect)
    clock.mark("recorded")
    return record


def timed_window(config, placement: Placement, device, train_step, synchronize,
                 clock: RunClock) -> Window:
    """The M timed iterations after warm-up, between the barrier that opens the window and the
    synchronize that closes it, and every rank's figures gathered once it is closed; `clock`
    marks the window's edges."""
    mark, seconds_between = window_clock(device)
    host_before = host_snapshot(placement)
    with window_opened(device, synchronize) as sampler:
        clock.mark("window_opened")   # before the window's clock starts: nothing inside it
        marks = [mark()]
        start = time.perf_counter()
        for iteration in range(config.warmup_iters, config.warmup_iters + config.timed_iters):
            train_step(iteration)
            marks.append(mark())
        synchronize()
        elapsed = time.perf_counter() - start
        clock.mark("window_closed")
        sampler.energy_at_end()
        host_after = host_snapshot(placement)
    iteration_times = [seconds_between(a, b) for a, b in zip(marks, marks[1:])]
    gpu_state = sampler.summary()
    own = {"elapsed": elapsed, "peak_memory": peak_memory_bytes(device), "gpu_state": gpu_state,
           "energy": sampler.energy(),
           "host_state": host_record(placement, host_before, host_after)}
    return Window(iteration_times, own, gather_objects(own))


def window_record(config, placement: Placement, device, threads: int, window: Window,
                  losses: list, interconnect: dict) -> dict:
    """The run's record: the global throughput from the slowest rank's window, every step's
    loss, the largest peak memory over the ranks, the energy, the hosts' and GPUs' state, the
    interconnect probe's figures and the environment."""
    per_rank_elapsed = [values["elapsed"] for values in window.per_rank]
    images_per_rank = config.batch_per_device * config.timed_iters
    timed_images = placement.world_size * images_per_rank
    slowest = max(per_rank_elapsed)
    return {
        **record_header(config, placement, device, threads),
        "global_ips": timed_images / slowest,
        "elapsed_s": slowest,
        "timed_images": timed_images,
        "iteration_times_s": window.iteration_times,
        "per_rank_ips": [images_per_rank / value for value in per_rank_elapsed],
        "per_rank_elapsed_s": per_rank_elapsed,
        "first_loss": float(losses[0].float().item()),
        "last_loss": float(losses[-1].float().item()),
        "losses": torch.stack(losses).float().tolist(),
        "peak_memory_bytes": int(max(values["peak_memory"] for values in window.per_rank)),
        "peak_memory_covers": peak_memory_covers(device, config.cuda_graphs),
        **run_energy([values["energy"] for values in window.per_rank], timed_images),
        **window_state(window.own["gpu_state"], window.per_rank, device.type == "cuda"),
        **probe_figures(interconnect),
        "environment": collect_environment(device),
    }


def reset_peak_memory(device) -> None:
    """Restart CUDA's peak-memory counter once warm-up is done: cuDNN's benchmark mode tries
    algorithms with large workspaces in the first steps, which the training never uses again.
    A CPU process's peak resident set cannot be restarted; it stays the whole process's."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_memory_bytes(device) -> int:
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def peak_memory_covers(device, cuda_graphs: bool) -> str:
    """What the record's `peak_memory_bytes` spans. A CUDA graph's replays allocate nothing,
    so its capture (after warm-up, before the window) is where its memory shows."""
    if device.type != "cuda":
        return "whole process (peak resident set size)"
    if cuda_graphs:
        return "CUDA graph capture and timed window (after warm-up)"
    return "timed window (after warm-up)"


def window_clock(device):
    """(mark, seconds_between) for the timed window's iterations: CUDA events time the
    device's own work; on CPU the host clock is the device's."""
    if device.type != "cuda":
        return time.perf_counter, lambda earlier, later: later - earlier

    def mark():
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    return mark, lambda earlier, later: earlier.elapsed_time(later) / 1000.0


@contextlib.contextmanager
def window_opened(device, synchronize):
    """The timed window's start on this rank: its GPU state reader, once every rank is here,
    with the GPU's energy counter read (the window's caller reads it again as it closes).

    Everything a rank sets up comes before the barrier: the window of the slowest rank decides
    the global throughput, and NVML's start-up (different on every rank) inside it would add
    that spread to the result. The NVML thread's first reading comes `interval` after it
    starts, so a short wait at the barrier is not read as the window's GPU state; the energy
    counter is read after the barrier, so that wait is not counted either."""
    with gpu_state_sampler(device) as sampler:
        synchronize()
        barrier()
        sampler.energy_at_start()
        yield sampler


def gather_objects(value) -> list:
    """Every rank's `value` (JSON-like), in rank order (just ours when not distributed)."""
    if not dist.is_initialized():
        return [value]
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, value)
    return gathered
