"""Every CUDA path of the workload, a few iterations each, through the real worker and the suite's
agent: the first thing to run on a new GPU host. One table (path, outcome, img/s, note); the
exit status is non-zero where any path fails. A path whose library or devices are absent here is
`skipped` with the reason; on a host without CUDA the tool says so in one line (with --only, the
paths named, each skipped for that, and exit status 1).

    rn50-perf gpu-check                      # every path
    rn50-perf gpu-check --only amp,cuda-graphs --iters 20 --output gpu_check.json

The precision paths train with the fused SGD (the default on CUDA); foreach and for-loop SGD
have paths of their own. A path passes when its run finishes with every step's loss finite and
none above 10 times the first (a diverging step; see LOSS_RISE_LIMIT in tools/gpu/cuda_paths.py),
or, for the out-of-memory paths, when it ends as `oom`, the outcome the suite reports; the NVML
path when every rank's GPU state carries its clocks. `amp-in-image` is the amp path with its
workers inside a bwrap image of this machine's own root (tools/gpu/image_path.py).

`--measure DIR` is the first GPU hour in one command, within 20 minutes on one GPU (`--budget`
says otherwise; `--steps` picks steps, in the order given): this path table, the machine's 1n1g
baselines (fp32 b128, tf32 b256, amp b256, bf16 b256 at 224 px, 3 runs of 20 warm-up + 100 timed
iterations), img/s and MFU per precision against the card's measured matmul peaks, the harness's
timed window against a bare loop, the torch loader against synthetic data, one explain, one
max-batch search and a smoke-sized time-to-train through the suite. The steps run in order; one
that fails or runs out of its share of the time is recorded with its reason and the rest go on,
and the last are skipped where the budget runs out; the exit status is 1 where any step failed.
DIR gets at most 8 files (see tools/gpu/measure.py): summary.md, measure.json, measure.log,
paths.json, baseline-results.json and <hardware key>.json, the baseline file to copy into
baselines/.

    rn50-perf gpu-check --measure gpu-hour
    rn50-perf gpu-check --measure gpu-hour --budget 540 --steps environment,peaks,harness
"""
from __future__ import annotations

from pathlib import Path

from perf_tests.cli.values import whole_number
from perf_tests.runs.stop_signals import stop_on_signals
from tools.cli import OneLineParser
from tools.command import verb_command
from tools.gpu.cuda_paths import (FAILED, PATH_BATCH, PATH_ITERS, PATH_WARMUP, Host, check_paths,
                                  host_problems, path_table, paths)
from tools.gpu.hour import BUDGET_S, MeasureError
from tools.gpu.measure import measure
from tools.gpu.steps import plan
from tools.worker_runs import NeedsCuda, require_cuda


def make_parser() -> OneLineParser:
    parser = OneLineParser(prog=verb_command("gpu-check"), description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=whole_number(1), default=PATH_BATCH,
                        help=f"batch per device (default {PATH_BATCH}; the oom paths use their "
                             "own)")
    parser.add_argument("--image-size", type=whole_number(32), default=224,
                        help="image side in pixels (default 224)")
    parser.add_argument("--warmup", type=whole_number(0), default=PATH_WARMUP,
                        help=f"warm-up iterations a run (default {PATH_WARMUP}; CUDA graphs "
                             "with DDP run at least 11 eager steps whatever this says)")
    parser.add_argument("--iters", type=whole_number(1), default=PATH_ITERS,
                        help=f"timed iterations a run (default {PATH_ITERS})")
    parser.add_argument("--only", default="",
                        help="comma list of path names, or parts of them (default: every path)")
    parser.add_argument("--timeout", type=whole_number(1), default=900,
                        help="seconds one path may take (default 900)")
    parser.add_argument("--output", type=Path, help="also write the rows as JSON here")
    parser.add_argument("--measure", type=Path, metavar="DIR",
                        help="instead, the first GPU hour in one command (paths, baselines, MFU, "
                             "harness, loader, explain, max batch, time-to-train) into the new "
                             "folder DIR, at most 8 files, within 20 minutes (default: off)")
    parser.add_argument("--budget", type=whole_number(60), default=BUDGET_S, metavar="SECONDS",
                        help=f"with --measure: the seconds it may take (default {BUDGET_S}); "
                             "the steps run in order, each given its own estimate first, and "
                             "one with under half its estimate left is skipped")
    parser.add_argument("--steps", default="",
                        help="with --measure: comma list of the steps to run, in this order "
                             f"(default every step: {', '.join(step.name for step in plan())})")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    if not args.measure and (args.steps or args.budget != BUDGET_S):
        parser.error("--budget and --steps go with --measure DIR")
    if args.measure:
        devices = require_cuda("rn50-perf gpu-check --measure")
        stop_on_signals()  # SIGTERM ends the running step's processes, as Ctrl-C does
        only = [part.strip() for part in args.steps.split(",") if part.strip()]
        try:
            return measure(args.measure, devices, budget_s=args.budget, only=only or None)
        except MeasureError as error:
            parser.exit(2, f"rn50-perf gpu-check --measure: {error}\n")
    wanted = [part.strip() for part in args.only.split(",") if part.strip()]
    try:
        devices, no_cuda = require_cuda("rn50-perf gpu-check"), ""
    except NeedsCuda as refusal:
        if not wanted:
            raise
        devices, no_cuda = 0, refusal.why   # the paths asked for, each skipped with the reason
    stop_on_signals()  # SIGTERM (a --measure step's limit) ends the running worker, as Ctrl-C
    selected = [path for path in paths(devices)
                if not wanted or any(part in path.name for part in wanted)]
    if not selected:
        parser.error(f"--only {args.only!r} matches no path; paths are "
                     f"{', '.join(path.name for path in paths(devices))}")
    host = Host(devices, host_problems(selected, devices), no_cuda)
    common = {"device": "cuda", "data_backend": "synthetic", "image_size": args.image_size,
              "batch_per_device": args.batch, "warmup_iters": args.warmup,
              "timed_iters": args.iters}
    print(f"{devices} CUDA device(s); {len(selected)} paths, {args.warmup} warm-up + "
          f"{args.iters} timed iterations each, batch {args.batch} at {args.image_size} px\n",
          flush=True)
    rows = check_paths(selected, host, common, args.timeout, args.output)
    print("\n".join(path_table(rows)))
    failed = [row["path"] for row in rows if row["outcome"] == FAILED]
    if not devices:
        print(f"\nno path ran: rn50-perf gpu-check needs a CUDA device; {no_cuda}")
        return 1
    print(f"\n{len(rows) - len(failed)} of {len(rows)} paths passed or skipped"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0
