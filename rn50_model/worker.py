"""The training worker: one process per device, started by torchrun; measures one run.

One run is W warm-up iterations, then M timed iterations. The timed window opens after a
barrier and closes with a device synchronize on every rank; the slowest rank's window decides
the global throughput. Rank 0 writes the run's record (JSON) into `--run-dir` and prints it on
stdout behind `RN50_RECORD `, so a launcher can read it where the folder is not shared between
nodes. A rank that fails writes `rank<N>.failure.json` and prints `RN50_FAILURE {...}`; running
out of memory is the outcome `oom`, not a crash.

    torchrun --standalone --nproc-per-node 8 -m rn50_model.worker \\
        --run-dir runs/1n8g --precision amp --batch-per-device 256
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import re
import resource
import signal
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from .failures import first_line, is_out_of_memory
from .files import write_json_atomically
from .startup import (Placement, barrier, dist_initialized, record_header, start_worker,
                      synchronizer)

RECORD_MARK = "RN50_RECORD "
FAILURE_MARK = "RN50_FAILURE "
FAULT_VARIABLE = "RN50_FAULT"
EXIT_ERROR = 1
EXIT_OOM = 3


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
    def from_environment(cls) -> "Fault | None":
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
                             "diverge@iter=I,times=F")
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
        return fault

    def held_memory(self, device):
        """`grow`'s N MiB on `device`, every page written (an untouched allocation would not
        count in a CPU's resident set), to be kept until the window ends; None otherwise."""
        if self.kind != "grow":
            return None
        import torch
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
            import torch
            # On the training device: a CUDA run must meet the CUDA allocator's own error.
            torch.empty(1 << 50, dtype=torch.uint8, device=device)


def reset_peak_memory(device) -> None:
    """Restart CUDA's peak-memory counter once warm-up is done: cuDNN's benchmark mode tries
    algorithms with large workspaces in the first steps, which the training never uses again.
    A CPU process's peak resident set cannot be restarted; it stays the whole process's."""
    import torch
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_memory_bytes(device) -> int:
    import torch
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


class NoGpuState:
    """The GPU state reader of a CPU run: nothing to read."""

    def __enter__(self) -> "NoGpuState":
        return self

    def __exit__(self, *exc) -> None:
        pass

    def summary(self) -> dict:
        return {}

    def energy_at_start(self) -> None:
        pass

    def energy_at_end(self) -> None:
        pass

    def energy(self) -> dict:
        from .gpu_state import no_energy
        return no_energy("no CUDA device")


def gpu_state_sampler(device):
    """This GPU's state, read through NVML from another thread while the window runs."""
    if device.type != "cuda":
        return NoGpuState()
    from .gpu_state import GpuIdentity, GpuStateSampler
    return GpuStateSampler(GpuIdentity.of(device))


def window_clock(device):
    """(mark, seconds_between) for the timed window's iterations: CUDA events time the
    device's own work; on CPU the host clock is the device's."""
    if device.type != "cuda":
        return time.perf_counter, lambda earlier, later: later - earlier
    import torch

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


def measure(config, placement: Placement, fault: Fault | None = None,
            run_dir: Path | None = None) -> dict:
    """Run W + M iterations and return rank 0's view of the run (every rank returns one); with
    `config.profile_iters`, W + N profiled iterations instead (see `profiled_run`)."""
    import torch

    from .data import Shard, build_batches
    from .environment import collect_environment
    from .gpu_state import is_throttling, run_energy
    from .training import Trainer

    device, threads = start_worker(config, placement)
    batches = build_batches(config, device, Shard(placement.rank, placement.world_size,
                                                  placement.local_rank), threads)
    trainer = Trainer(config, device, world_size=placement.world_size,
                      distributed=placement.world_size > 1)
    synchronize = synchronizer(device)

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
    reset_peak_memory(device)
    held = fault.held_memory(device) if fault else None  # noqa: F841 (held through the window)
    if config.cuda_graphs:
        trainer.capture_cuda_graph(*next(batches))
    if config.profile_iters:
        return profiled_run(config, placement, device, train_step, synchronize,
                            Path(run_dir or "."))
    mark, seconds_between = window_clock(device)
    host_before = host_snapshot(placement)
    with window_opened(device, synchronize) as sampler:
        marks = [mark()]
        start = time.perf_counter()
        for iteration in range(config.warmup_iters, config.warmup_iters + config.timed_iters):
            loss = train_step(iteration)
            marks.append(mark())
        synchronize()
        elapsed = time.perf_counter() - start
        sampler.energy_at_end()
        host_after = host_snapshot(placement)
    iteration_times = [seconds_between(a, b) for a, b in zip(marks, marks[1:])]
    window_gpu_state = sampler.summary()

    # Every rank's window, peak memory, GPU state (a GPU throttling on any rank slows the whole
    # job) and energy, and each host's state from its local rank 0, in rank order.
    per_rank = gather_objects({"elapsed": elapsed, "peak_memory": peak_memory_bytes(device),
                               "gpu_state": window_gpu_state, "energy": sampler.energy(),
                               "host_state": host_record(placement, host_before, host_after)})
    host_states = [values["host_state"] for values in per_rank if values["host_state"]]
    per_rank_elapsed = [values["elapsed"] for values in per_rank]
    images_per_rank = config.batch_per_device * config.timed_iters
    timed_images = placement.world_size * images_per_rank
    slowest = max(per_rank_elapsed)
    gpu_states = [values["gpu_state"] for values in per_rank] if device.type == "cuda" else []
    interconnect = interconnect_probe(config, trainer.model, device, synchronize)
    return {
        **record_header(config, placement, device, threads),
        "global_ips": timed_images / slowest,
        "elapsed_s": slowest,
        "timed_images": timed_images,
        "iteration_times_s": iteration_times,
        "per_rank_ips": [images_per_rank / value for value in per_rank_elapsed],
        "per_rank_elapsed_s": per_rank_elapsed,
        "first_loss": float(losses[0].float().item()),
        "last_loss": float(loss.float().item()),
        "losses": torch.stack(losses).float().tolist(),
        "peak_memory_bytes": int(max(values["peak_memory"] for values in per_rank)),
        "peak_memory_covers": peak_memory_covers(device, config.cuda_graphs),
        **run_energy([values["energy"] for values in per_rank], timed_images),
        "gpu_state_during_window": window_gpu_state or None,
        "gpu_state_per_rank": gpu_states or None,
        "throttled_ranks": [rank for rank, state in enumerate(gpu_states)
                            if is_throttling(state)],
        "throttled": any(is_throttling(state) for state in gpu_states),
        "host_state": host_states,
        "host_busy": host_busy(host_states, gpu_states),
        **interconnect_figures(interconnect),
        "environment": collect_environment(device),
    }


def interconnect_probe(config, model, device, synchronize) -> dict:
    """The interconnect probe (rn50_model/interconnect.py), run by every rank once the timed
    window is closed and its figures gathered, so it never touches them."""
    from .interconnect import messages_of, probe
    return probe(messages_of(model), device, config.interconnect_iters, synchronize)


def interconnect_figures(interconnect: dict) -> dict:
    """The record's fields from the probe: all of it, and its two figures at the top level
    (None where it was skipped)."""
    return {"interconnect": interconnect, "busbw_gbps": interconnect.get("busbw_gbps"),
            "gradient_allreduce_s": interconnect.get("gradient_allreduce_s")}


def interconnect_run(config, placement: Placement) -> dict:
    """`--interconnect-only`: the probe alone, on the model's messages, without training (is the
    fabric itself slower?)."""
    from .environment import collect_environment
    from .model import resnet50

    device, threads = start_worker(config, placement)
    model = resnet50(num_classes=config.num_classes).to(device)
    interconnect = interconnect_probe(config, model, device, synchronizer(device))
    return {**record_header(config, placement, device, threads, mode="interconnect"),
            **interconnect_figures(interconnect), "environment": collect_environment(device)}


def host_snapshot(placement: Placement):
    """The host's CPU counters, read by one process per host (its local rank 0); None on the
    others."""
    from .host_state import CpuSnapshot
    return CpuSnapshot.of_this_run() if placement.local_rank == 0 else None


def host_record(placement: Placement, before, after) -> dict | None:
    """This host's state during the window, with its node; None on the ranks that read none."""
    from .host_state import host_state
    if before is None or after is None:
        return None
    return {**host_state(before, after), "node": placement.node_rank}


def host_busy(host_states: list[dict], gpu_states: list[dict] = ()) -> list[str]:
    """Why the run is marked: what kept the hosts busy during the window, each clause prefixed
    with its host (and node, as simulated nodes share a host) where there are several, then
    what was off on each rank's GPU (gpu_state.unfit_clauses)."""
    from .gpu_state import ranks_unfit_reasons
    from .host_state import busy_reasons
    several = len(host_states) > 1
    return [f"{state['host']} (node {state['node']}): {reason}" if several else reason
            for state in host_states for reason in busy_reasons(state)
            ] + ranks_unfit_reasons(list(gpu_states))


def profiled_run(config, placement: Placement, device, train_step, synchronize,
                 run_dir: Path) -> dict:
    """The record of a profiled run: rank 0's operator profile and its trace file; its img/s is
    the profiled iterations' (the profiler's overhead included), never a measurement."""
    from .environment import collect_environment
    from .op_profile import TRACE_FILE, profile_steps

    barrier()
    trace = run_dir / TRACE_FILE if placement.rank == 0 else None
    start = time.perf_counter()
    summary = profile_steps(train_step, config.profile_iters, config.warmup_iters, device,
                            synchronize, placement.world_size, trace)
    elapsed = time.perf_counter() - start
    return {
        **record_header(config, placement, device, kind="op_profile"),
        "global_ips": placement.world_size * config.batch_per_device * config.profile_iters
        / elapsed,
        "op_profile": summary,
        "trace_file": TRACE_FILE,
        "environment": collect_environment(device),
    }


def gather_objects(value) -> list:
    """Every rank's `value` (JSON-like), in rank order (just ours when not distributed)."""
    import torch.distributed as dist
    if not dist.is_initialized():
        return [value]
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, value)
    return gathered


def parse_arguments(argv: list[str] | None):
    from .config import TrainConfig

    parser = argparse.ArgumentParser(
        prog="python -m rn50_model.worker",
        description="Measure ResNet50 v1.5 training throughput (one process per device; "
                    "start it with torchrun).")
    parser.add_argument("--config", help="JSON file of TrainConfig fields (flags override it)")
    parser.add_argument("--run-dir", default=".", help="where record.json and failures go "
                        "(default: the current folder)")
    parser.add_argument("--redirect-logs", action="store_true",
                        help="send this rank's stdout and stderr to <run-dir>/rank<N>.log")
    parser.add_argument("--interconnect-only", action="store_true",
                        help="only the interconnect probe (rn50_model.interconnect), no training")
    parser.add_argument("--time-to-train", metavar="FILE",
                        help="instead of measuring throughput, train to a target top-1 "
                             "(rn50_model.convergence); FILE is a JSON of ConvergenceConfig "
                             "fields (default: not set)")
    for spec in dataclasses.fields(TrainConfig):
        flag = "--" + spec.name.replace("_", "-")
        if spec.type in ("bool", bool):
            parser.add_argument(flag, dest=spec.name, default=None,
                                action=argparse.BooleanOptionalAction)
        else:
            kind = {"int": int, "float": float}.get(str(spec.type).split(" ")[0], str)
            parser.add_argument(flag, dest=spec.name, default=None, type=kind,
                                help=f"default {spec.default}")
    return parser.parse_args(argv)


def build_config(arguments):
    from .config import TrainConfig
    config = TrainConfig.from_json_file(arguments.config) if arguments.config else TrainConfig()
    overrides = {spec.name: getattr(arguments, spec.name)
                 for spec in dataclasses.fields(TrainConfig)
                 if getattr(arguments, spec.name) is not None}
    return dataclasses.replace(config, **overrides)


def report_failure(run_dir: Path, placement: Placement, error: BaseException, console,
                   memory_limited: bool = False) -> int:
    failed_at = time.time()  # the first failure in time is the cause; later ones its echo
    outcome = "oom" if is_out_of_memory(error, memory_limited) else "error"
    # Source locations such as "[enforce fail at alloc_cpu.cpp:127] err == 0. " or
    # "[.../gloo/transport/tcp/pair.cc:553] " say nothing to a user.
    message = re.sub(r"^\[[^\]]*\.(?:cc|cpp|h):\d+\]\s*(?:err == 0\.\s*)?", "",
                     first_line(error))
    failure = {"rank": placement.rank, "node_rank": placement.node_rank, "outcome": outcome,
               "failed_at": failed_at, "error_type": type(error).__name__, "message": message,
               "traceback": traceback.format_exc()}
    try:
        write_json_atomically(run_dir / f"rank{placement.rank}.failure.json", failure)
    except OSError:
        pass  # the line on stdout below still carries it
    print(FAILURE_MARK + json.dumps(failure), file=console, flush=True)
    traceback.print_exc()
    print(f"rank {placement.rank}: {outcome}: {failure['message']}", file=sys.stderr, flush=True)
    return EXIT_OOM if outcome == "oom" else EXIT_ERROR


def summary_line(record: dict, config, run_dir: Path) -> str:
    """Rank 0's last line: what the run measured."""
    if record.get("mode") == "interconnect":
        busbw = record.get("busbw_gbps")
        return (f"interconnect: busbw {busbw:.3g} GB/s over {record['world_size']} workers"
                if busbw is not None else f"interconnect: {record['interconnect']['skipped']}")
    what = ("profiled, not a measurement; operator profile and trace in "
            f"{run_dir}" if record.get("op_profile") else
            f"{config.precision}, batch {config.batch_per_device}, {config.image_size}px")
    return f"{record['global_ips']:.1f} img/s over {record['world_size']} workers ({what})"


def main(argv: list[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    placement = Placement.from_environment()
    run_dir = Path(arguments.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    console = sys.stdout
    if arguments.redirect_logs:
        # Keep the original stdout for the record line; everything else goes to this rank's log.
        console = os.fdopen(os.dup(1), "w")
        log = os.open(run_dir / f"rank{placement.rank}.log",
                      os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
    config = None
    try:
        config = build_config(arguments)
        fault = Fault.from_environment()
        if fault and fault.batch not in (None, config.batch_per_device):
            fault = None
        if arguments.time_to_train:
            from .convergence import ConvergenceConfig, train_to_target
            record = train_to_target(config, ConvergenceConfig.from_json_file(
                arguments.time_to_train), placement, run_dir)
        elif arguments.interconnect_only:
            record = interconnect_run(config, placement)
        else:
            record = measure(config, placement, fault, run_dir)
    except Exception as error:
        return report_failure(run_dir, placement, error, console,
                              memory_limited=bool(config and config.memory_limit_bytes))
    finally:
        if dist_initialized():
            import torch.distributed as dist
            dist.destroy_process_group()
    if placement.rank == 0:
        if record.get("op_profile"):
            from .op_profile import SUMMARY_FILE
            write_json_atomically(run_dir / SUMMARY_FILE, record["op_profile"])
        write_json_atomically(run_dir / "record.json", record)
        print(RECORD_MARK + json.dumps(record), file=console, flush=True)
        print(summary_line(record, config, run_dir), file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
