"""The interconnect probe's cost: the real multi-device worker with the probe against without it.

Every multi-device run all-reduces a DDP bucket and the whole gradient after its timed window
closes (rn50_model/interconnect.py). Two questions: what does that add to a run (the probe's own
seconds, and the run's wall time), and is the timed window untouched (its img/s the same with
and without the probe)? Each pair runs the worker as the suite starts it (its agent, `--nproc`
processes) with `interconnect_iters` N and with 0, same workload, interleaved pair by pair with
the order alternating. Prints every pair, the ratios (with / without: 1.00 means untouched), the
median probe seconds and the median extra wall time a run.

    rn50-perf bench-probe --pairs 7 --image-size 64 --batch 8 --warmup 2 --iters 10 \\
        --threads 1                                                     # CPU, 2 ranks on gloo
    rn50-perf bench-probe --device cuda --precision bf16 --batch 256 --image-size 224

`--output FILE` also writes the settings, every pair and the figures as JSON.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

from perf_tests.cli.values import whole_number
from tools.cli import OneLineParser
from tools.command import verb_command
from tools.worker_runs import add_workload_options, interleaved, ratios, worker_run, workload_line

NAMES = ("without_probe", "with_probe")   # reference, candidate


class RunFailed(SystemExit):
    """A worker run that did not end `ok`: one line on stderr, exit status 1."""

    def __init__(self, probe_iters: int, record: dict) -> None:
        super().__init__(f"bench_probe: the run with interconnect_iters {probe_iters} ended "
                         f"{record.get('outcome')}: {record.get('message', 'no message')}")


def timed_run(args: argparse.Namespace, probe_iters: int) -> dict:
    """One worker run with `probe_iters` timed all-reduces a message: its img/s, the probe's
    figures (or why it was skipped) and the run's wall time, launch to exit."""
    settings = {"device": args.device, "precision": args.precision,
                "batch_per_device": args.batch, "image_size": args.image_size,
                "warmup_iters": args.warmup, "timed_iters": args.iters, "threads": args.threads,
                "memory_format": args.memory_format, "interconnect_iters": probe_iters}
    started = time.perf_counter()
    record = worker_run(settings, nproc=args.nproc)
    wall_s = time.perf_counter() - started
    if record.get("outcome") != "ok":
        raise RunFailed(probe_iters, record)
    interconnect = record["interconnect"]
    return {"ips": record["global_ips"], "wall_s": wall_s,
            "probe_seconds": interconnect.get("probe_seconds"),
            "busbw_gbps": record.get("busbw_gbps"), "interconnect": interconnect}


def summary(pairs: list[dict]) -> dict:
    """What the pairs add up to: the img/s ratios (with probe over without), the median probe
    seconds and the median of each pair's extra wall time."""
    without, with_probe = ([pair[name] for pair in pairs] for name in NAMES)
    return {**ratios([run["ips"] for run in without], [run["ips"] for run in with_probe], NAMES),
            "median_probe_seconds": statistics.median(run["probe_seconds"] for run in with_probe),
            "median_busbw_gbps": statistics.median(run["busbw_gbps"] for run in with_probe),
            "median_extra_wall_s": statistics.median(
                w["wall_s"] - o["wall_s"] for w, o in zip(with_probe, without))}


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog=verb_command("bench-probe"), description=__doc__.split("\n\n")[0])
    add_workload_options(parser, threads=1)
    parser.add_argument("--probe-iters", type=whole_number(1), default=5,
                        help="interconnect_iters of the runs with the probe (default 5)")
    parser.add_argument("--nproc", type=whole_number(2), default=2,
                        help="worker processes a run, one a device (default 2)")
    args = parser.parse_args(argv)

    print(f"{workload_line(args)}; {args.nproc} ranks, probe {args.probe_iters} iterations "
          "a message against none")
    print(f"{'pair':>4}  {'with img/s':>10}  {'without img/s':>13}  {'ratio':>6}  "
          f"{'probe s':>7}  {'busbw GB/s':>10}  {'extra wall s':>12}")
    pairs = []
    for pair, without, with_probe in interleaved(args.pairs, lambda: timed_run(args, 0),
                                                 lambda: timed_run(args, args.probe_iters)):
        pairs.append({"pair": pair, "first": NAMES[1 - pair % 2],
                      "without_probe": without, "with_probe": with_probe})
        print(f"{pair:>4}  {with_probe['ips']:>10.2f}  {without['ips']:>13.2f}  "
              f"{with_probe['ips'] / without['ips']:>6.3f}  {with_probe['probe_seconds']:>7.2f}  "
              f"{with_probe['busbw_gbps']:>10.3g}  "
              f"{with_probe['wall_s'] - without['wall_s']:>+12.1f}")
    result = summary(pairs)
    print(f"with / without the probe: median pair ratio {result['median_pair_ratio']:.3f}, "
          f"ratio of medians {result['ratio_of_medians']:.3f} (median "
          f"{result['median_with_probe_ips']:.2f} against {result['median_without_probe_ips']:.2f}"
          f" img/s); probe {result['median_probe_seconds']:.2f} s a run (median), busbw "
          f"{result['median_busbw_gbps']:.3g} GB/s, extra wall time "
          f"{result['median_extra_wall_s']:+.1f} s a run (median of pairs)")
    if args.output:
        settings = {name: value for name, value in vars(args).items() if name != "output"}
        args.output.write_text(json.dumps({"settings": settings, "pairs": pairs, **result},
                                          indent=2) + "\n")
    return 0
