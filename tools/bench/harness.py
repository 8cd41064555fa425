"""Harness overhead: the worker's timed window against a bare training loop, side by side.

Both train the same ResNet50 v1.5 with the same batch, image size, precision, memory format and
threads, each in fresh processes, interleaved pair by pair so that drift on a noisy machine hits
both alike. The worker runs exactly as the suite starts it (its run loop and local launcher, one
process); the bare loop is the plainest code that does the same work. Prints every pair and the
ratio of medians (worker / bare): 1.00 means no overhead; then where the worker's runs spent
their wall time, phase by phase, beside the bare loop's wall time.

    rn50-perf bench-harness --pairs 7 --iters 30          # CPU
    rn50-perf bench-harness --pairs 7 --iters 30 --fork-server
    rn50-perf bench-harness --device cuda --precision bf16 --batch 256 --image-size 224

`--fork-server`: the worker's runs forked by a fork server, as a session starts them (the first
pair's worker starts the server); the bare loop, the same in both, is the reference that puts
a forked worker's ratio beside a fresh one's.

`--output FILE` also writes the settings, every pair and both ratios as JSON.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

from perf_tests.runs.fork_servers import ServerFolder
from perf_tests.runs.host import worker_environment
from perf_tests.runs.phases import NAMES, WALL, measured_share, median_phases
from tools.cli import SUITE_ROOT, OneLineParser
from tools.command import verb_command
from tools.worker_runs import (add_workload_options, interleaved, ratios, worker_run,
                               workload_line)

# The plainest loop: no data pipeline object, no process group, no records.
BARE_LOOP = r"""
import sys, time, torch
from torch import nn
from rn50_model.model import resnet50
from rn50_model.training import configure_math
device, precision, batch, size, warmup, iters, threads, layout = sys.argv[1:9]
batch, size, warmup, iters, threads = map(int, (batch, size, warmup, iters, threads))
torch.set_num_threads(threads)
device = torch.device(device)
configure_math(precision, device.type, cudnn_benchmark=True)  # TF32 and cuDNN as the worker's
memory_format = torch.channels_last if layout == "channels_last" else torch.contiguous_format
torch.manual_seed(0)
model = resnet50().to(device=device, memory_format=memory_format)
decay = [p for n, p in model.named_parameters() if p.ndim > 1]
no_decay = [p for n, p in model.named_parameters() if p.ndim <= 1]
implementation = {"fused": True} if device.type == "cuda" else {"foreach": True}
optimizer = torch.optim.SGD([{"params": decay, "weight_decay": 3.0517578125e-05},
                             {"params": no_decay, "weight_decay": 0.0}], lr=0.256 * batch / 256,
                            momentum=0.875, **implementation)
loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1)
dtype = {"amp": torch.float16, "bf16": torch.bfloat16}.get(precision)
scaler = torch.amp.GradScaler("cuda") if precision == "amp" else None
images = torch.randn(batch, 3, size, size).to(device=device, memory_format=memory_format)
if precision == "amp":
    images = images.half()
labels = torch.randint(0, 1000, (batch,)).to(device)
sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

def step():
    with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
        loss = loss_fn(model(images), labels)
    optimizer.zero_grad(set_to_none=True)
    if scaler is None:
        loss.backward()
        optimizer.step()
    else:
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()

for _ in range(warmup):
    step()
sync()
start = time.perf_counter()
for _ in range(iters):
    step()
sync()
print(batch * iters / (time.perf_counter() - start))
"""


def bare_run(args) -> tuple[float, float]:
    """One bare loop in a fresh process: (img/s, its wall time, start to exit)."""
    started = time.time()
    done = subprocess.run(
        [sys.executable, "-c", BARE_LOOP, args.device, args.precision, str(args.batch),
         str(args.image_size), str(args.warmup), str(args.iters), str(args.threads),
         args.memory_format], env=worker_environment(SUITE_ROOT), capture_output=True, text=True,
        check=True)
    return float(done.stdout.split()[-1]), time.time() - started


def worker_record(args, servers: ServerFolder | None) -> dict:
    """One run of the worker as the suite starts it: its record, with its `phases`."""
    record = worker_run({
        "device": args.device, "precision": args.precision, "batch_per_device": args.batch,
        "image_size": args.image_size, "warmup_iters": args.warmup, "timed_iters": args.iters,
        "threads": args.threads, "memory_format": args.memory_format,
        "optimizer_impl": "fused" if args.device == "cuda" else "foreach"}, servers=servers)
    if record.get("outcome") != "ok":
        raise SystemExit(f"{verb_command('bench-harness')}: the worker's run failed: "
                         f"{record.get('message')}")
    return record


def split_lines(phases: dict, bare_wall: float) -> list[str]:
    """Where the worker's run spent its wall time, phase by phase, beside the bare loop's."""
    lines = [f"median wall time: worker {phases[WALL]:.2f} s, bare loop {bare_wall:.2f} s "
             f"(start to exit; the worker's warm-up and window {measured_share(phases):.0%} of "
             "its)"]
    lines += [f"  {name:<11} {phases[name]:>6.2f} s" for name in NAMES if name in phases]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog=verb_command("bench-harness"), description=__doc__.split("\n\n")[0])
    add_workload_options(parser, threads=len(os.sched_getaffinity(0)))
    parser.add_argument("--fork-server", action="store_true",
                        help="fork the worker's runs from a fork server, as a session does "
                             "(default: each worker a fresh interpreter)")
    args = parser.parse_args(argv)
    servers = ServerFolder() if args.fork_server else None
    try:
        return compare(args, servers)
    finally:
        if servers is not None:
            servers.close()


def compare(args, servers: ServerFolder | None) -> int:

    print(workload_line(args))
    print(f"{'pair':>4}  {'bare img/s':>10}  {'worker img/s':>12}  {'ratio':>6}")
    bare, worker, bare_walls, phases = [], [], [], []
    for pair, one_bare, one_worker in interleaved(args.pairs, lambda: bare_run(args),
                                                  lambda: worker_record(args, servers)):
        bare.append(one_bare[0])
        bare_walls.append(one_bare[1])
        worker.append(one_worker["global_ips"])
        phases.append(one_worker["phases"])
        print(f"{pair:>4}  {bare[-1]:>10.2f}  {worker[-1]:>12.2f}  {worker[-1] / bare[-1]:>6.3f}")
    result = ratios(bare, worker, names=("bare", "worker"))
    print(f"median bare {result['median_bare_ips']:.2f} img/s, worker "
          f"{result['median_worker_ips']:.2f} img/s: ratio of medians "
          f"{result['ratio_of_medians']:.3f}, median of pair ratios "
          f"{result['median_pair_ratio']:.3f}")
    split = median_phases(phases)
    bare_wall = statistics.median(bare_walls)
    print("\n".join(split_lines(split, bare_wall)))
    if args.output:
        settings = {name: value for name, value in vars(args).items() if name != "output"}
        args.output.write_text(json.dumps({"settings": settings, **result,
                                           "worker_phases": split,
                                           "median_bare_wall_s": bare_wall}, indent=2) + "\n")
    return 0
