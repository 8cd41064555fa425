"""A worker process's start, the same for a throughput run (timed_window.py), the interconnect
probe alone (interconnect.py) and training to a target (convergence.py): where it sits in the job
(torchrun's environment), its device, CPU threads, process group and memory limit, and the header
of the record its run writes.
"""
from __future__ import annotations

import os
import resource
from dataclasses import dataclass

from . import fork_server

# Set by a launcher that puts the workers of several nodes on one host (the suite's simulated
# nodes): they share its cores, which LOCAL_WORLD_SIZE alone does not tell.
WORKERS_PER_HOST_VARIABLE = "RN50_WORKERS_PER_HOST"
RECORD_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Placement:
    """Where this process sits in the job, from torchrun's environment (alone: rank 0 of 1)."""
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1
    node_rank: int = 0
    nodes: int = 1

    @classmethod
    def from_environment(cls) -> "Placement":
        get = os.environ.get
        world_size = int(get("WORLD_SIZE", 1))
        local_world_size = int(get("LOCAL_WORLD_SIZE", 1))
        return cls(rank=int(get("RANK", 0)), world_size=world_size,
                   local_rank=int(get("LOCAL_RANK", 0)), local_world_size=local_world_size,
                   node_rank=int(get("GROUP_RANK", 0)),
                   nodes=int(get("GROUP_WORLD_SIZE", world_size // max(local_world_size, 1))))

    @property
    def distributed(self) -> bool:
        """Started by torchrun (which sets the rendezvous address), not as a lone process."""
        return "RANK" in os.environ and "MASTER_ADDR" in os.environ


def device_index(local_rank: int, device_count: int, share_devices: bool = False) -> int:
    """The CUDA device of the worker of `local_rank` on its node: its own, or, where ranks share
    the devices (`share_devices`), rank r on device r % count; ConfigError where it has none."""
    if share_devices and device_count > 0:
        return local_rank % device_count
    if local_rank >= device_count:
        from .config import ConfigError
        raise ConfigError(f"local rank {local_rank} has no CUDA device of its own ({device_count} "
                          "here); run as many workers a node as devices, or share them "
                          "(share_devices, --perf-set share-devices=on)")
    return local_rank


def process_group_backend(config, device) -> str:
    """The process group's backend: the config's, else NCCL on CUDA and gloo on CPU."""
    if config.dist_backend != "auto":
        return config.dist_backend
    return "nccl" if device.type == "cuda" else "gloo"


def select_device(config, placement: Placement):
    import torch
    wanted = config.device
    if wanted == "auto":
        wanted = "cuda" if torch.cuda.is_available() else "cpu"
    if wanted == "cuda":
        if not torch.cuda.is_available():
            from .config import ConfigError
            raise ConfigError("device 'cuda' asked for, but torch sees no CUDA device here")
        index = device_index(placement.local_rank, torch.cuda.device_count(),
                             config.share_devices)
        torch.cuda.set_device(index)
        return torch.device("cuda", index)
    return torch.device("cpu")


def worker_threads(config, placement: Placement) -> int:
    """The CPU cores this process may use, split evenly across the workers on this node."""
    if config.threads:
        return config.threads
    sharing = int(os.environ.get(WORKERS_PER_HOST_VARIABLE, placement.local_world_size))
    return max(1, len(os.sched_getaffinity(0)) // max(sharing, 1))


def limit_memory(limit_bytes: int, device) -> None:
    """Let the training allocate at most `limit_bytes` more: a real allocator failure beyond it."""
    import torch
    if device.type == "cuda":
        total = torch.cuda.get_device_properties(device).total_memory
        torch.cuda.set_per_process_memory_fraction(min(limit_bytes / total, 1.0), device)
        return
    with open("/proc/self/statm") as handle:
        virtual_bytes = int(handle.read().split()[0]) * resource.getpagesize()
    limit = virtual_bytes + limit_bytes
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def start_worker(config, placement: Placement):
    """This process's device (checked against the config), its CPU threads, the process group
    where torchrun started it, and the memory limit: (device, threads)."""
    import torch
    import torch.distributed as dist

    device = select_device(config, placement)
    config.validate(device.type)
    threads = worker_threads(config, placement)
    torch.set_num_threads(threads)
    if placement.distributed and not dist.is_initialized():
        backend = process_group_backend(config, device)
        dist.init_process_group(backend=backend, device_id=device if backend == "nccl" else None)
    if config.memory_limit_bytes:
        limit_memory(config.memory_limit_bytes, device)
    return device, threads


def synchronizer(device):
    """A function that waits for the device's queued work: nothing to wait for on the CPU."""
    import torch
    return torch.cuda.synchronize if device.type == "cuda" else (lambda: None)


def dist_initialized() -> bool:
    import torch.distributed as dist
    return dist.is_available() and dist.is_initialized()


def barrier() -> None:
    """Wait until every rank is here (no wait for a lone process)."""
    if dist_initialized():
        import torch.distributed as dist
        dist.barrier()


def record_header(config, placement: Placement, device, threads: int | None = None,
                  **kind) -> dict:
    """The fields a run's record starts with: its schema version, the outcome `ok`, what kind
    of record it is where not a throughput measurement (`kind`: mode="time-to-train"), the
    configuration and the job's shape, and how rank 0 started (`worker_start`: `forked` by a
    fork server, whose imports it shares, or `fresh`); with `threads`, the workers per node and
    each one's CPU threads."""
    header = {"schema_version": RECORD_SCHEMA_VERSION, "outcome": "ok", **kind,
              "config": config.to_dict(), "device_type": device.type,
              "nodes": placement.nodes, "world_size": placement.world_size,
              "worker_start": "forked" if fork_server.FORKED else "fresh"}
    if threads is not None:
        header.update(local_world_size=placement.local_world_size, threads_per_worker=threads)
    return header
