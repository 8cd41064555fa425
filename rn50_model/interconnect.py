"""The interconnect, measured by the run's own workers: an all-reduce probe after the timed window.

When a multi-device case scales worse after an NCCL, driver or fabric change, the first
question is "the network or the GPUs?". Every multi-device run therefore all-reduces, in its own
process group (NCCL on CUDA, gloo on CPU) and after its timed window has closed, the messages
its training all-reduces: one DDP bucket (DDP's default 25 MiB) and the model's whole gradient
(its parameters' size in their own dtype: under amp and bf16 autocast the parameters, and so the
gradients DDP reduces, stay fp32). Each message is all-reduced `WARMUP_ITERS` times, then
`iters` times in one timed stretch; the time of one all-reduce is that stretch over `iters`,
averaged over the ranks, and the figures are nccl-tests' (its doc/PERFORMANCE.md):

    algbw = bytes / time               busbw = algbw x 2 (n - 1) / n      (all-reduce, n ranks)

in GB/s (1e9 bytes a second). The run's `busbw_gbps` is the whole gradient's, and
`gradient_allreduce_s` the time one step's gradient takes when nothing overlaps it (DDP overlaps
its buckets with the backward pass, so it bounds what communication can cost a step from above).
The worker's `--interconnect-only` runs the probe alone, without training (`interconnect_run`).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import torch
import torch.distributed as dist

from .environment import collect_environment
from .failures import is_out_of_memory
from .model import resnet50
from .startup import Placement, record_header, start_worker, synchronizer

DDP_BUCKET_BYTES = 25 * 1024 * 1024   # torch.nn.parallel.DistributedDataParallel's bucket_cap_mb
WARMUP_ITERS = 2
GIGA = 1e9


@dataclass(frozen=True)
class Message:
    name: str          # "ddp-bucket" or "gradient"
    nbytes: int
    dtype: object      # a torch.dtype

    @property
    def element_size(self) -> int:
        return torch.empty((), dtype=self.dtype).element_size()

    @property
    def elements(self) -> int:
        return max(1, self.nbytes // self.element_size)

    @property
    def sent_bytes(self) -> int:
        """What an all-reduce of it carries: whole elements."""
        return self.elements * self.element_size


def messages_of(model) -> list[Message]:
    """The messages a step of `model`'s training all-reduces: a DDP bucket and the whole
    gradient, in the dtype of its parameters."""
    parameters = [p for p in model.parameters() if p.requires_grad]
    dtype = parameters[0].dtype
    gradient = sum(p.numel() * p.element_size() for p in parameters)
    return [Message("ddp-bucket", min(DDP_BUCKET_BYTES, gradient), dtype),
            Message("gradient", gradient, dtype)]


def bus_factor(ranks: int) -> float:
    """nccl-tests' all-reduce bus bandwidth factor, 2 (n - 1) / n: what each rank's link
    carries for each byte of the message."""
    return 2 * (ranks - 1) / ranks


def bandwidths(nbytes: int, seconds: float, ranks: int) -> dict:
    algbw = nbytes / seconds / GIGA
    return {"algbw_gbps": algbw, "busbw_gbps": algbw * bus_factor(ranks)}


def skipped(reason: str) -> dict:
    return {"skipped": reason}


def allocated(message: Message, device, memory_limited: bool = False):
    """The message's tensor on `device`, or None where the device has no room for it (a run
    near its memory limit: the probe then skips, the run's own figures stand)."""
    try:
        return torch.ones(message.elements, dtype=message.dtype, device=device)
    except (RuntimeError, MemoryError) as error:
        if is_out_of_memory(error, memory_limited):
            return None
        raise


def every_rank_holds(holds: bool, device) -> bool:
    """Whether `holds` on every rank: all of them go on, or all skip (one rank skipping an
    all-reduce the others enter would leave them waiting)."""
    flag = torch.tensor([1 if holds else 0], dtype=torch.int32, device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    return bool(flag.item())


def probe(messages: list[Message], device, iters: int, synchronize) -> dict:
    """All-reduce each message in the initialized process group; nccl-tests' figures for each,
    the gradient's as the run's, and how long the probe took. Every rank calls it."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
        return skipped("one rank: nothing to all-reduce")
    if iters < 1:
        return skipped("interconnect_iters is 0")
    ranks = dist.get_world_size()
    started = time.perf_counter()
    measured = []
    for message in messages:
        tensor = allocated(message, device)
        if not every_rank_holds(tensor is not None, device):
            return skipped(f"out of memory for the {message.name} message "
                           f"({message.nbytes / 1e6:.0f} MB) on a rank")
        for _ in range(WARMUP_ITERS):
            dist.all_reduce(tensor)
        synchronize()
        dist.barrier()
        start = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(tensor)
        synchronize()
        own = (time.perf_counter() - start) / iters
        del tensor
        every = [None] * ranks
        dist.all_gather_object(every, own)
        seconds = sum(every) / ranks
        nbytes = message.sent_bytes
        measured.append({"name": message.name, "bytes": nbytes,
                         "dtype": str(message.dtype).removeprefix("torch."), "seconds": seconds,
                         "slowest_rank_seconds": max(every),
                         **bandwidths(nbytes, seconds, ranks)})
    gradient = measured[-1]
    return {"backend": dist.get_backend(), "ranks": ranks, "iters": iters,
            "warmup_iters": WARMUP_ITERS, "messages": measured,
            "busbw_gbps": gradient["busbw_gbps"], "gradient_allreduce_s": gradient["seconds"],
            "probe_seconds": time.perf_counter() - started}


def model_probe(config, model, device, synchronize) -> dict:
    """The probe on the messages of `model`'s training, run by every rank; in a throughput run
    once its timed window is closed and its figures gathered, so it never touches them."""
    return probe(messages_of(model), device, config.interconnect_iters, synchronize)


def probe_figures(interconnect: dict) -> dict:
    """The record's fields from the probe: all of it, and its two figures at the top level
    (None where it was skipped)."""
    return {"interconnect": interconnect, "busbw_gbps": interconnect.get("busbw_gbps"),
            "gradient_allreduce_s": interconnect.get("gradient_allreduce_s")}


def interconnect_run(config, placement: Placement) -> dict:
    """`--interconnect-only`: the probe alone, on the model's messages, without training (is the
    fabric itself slower?)."""
    device, threads = start_worker(config, placement)
    model = resnet50(num_classes=config.num_classes).to(device)
    interconnect = model_probe(config, model, device, synchronizer(device))
    return {**record_header(config, placement, device, threads, mode="interconnect"),
            **probe_figures(interconnect), "environment": collect_environment(device)}
