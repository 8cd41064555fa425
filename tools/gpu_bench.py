"""Everything the H200 issue measures, in one command on a CUDA host.

1. Throughput of every precision and batch at 1n1g (synthetic data, channels_last), with model
   FLOPs utilization against the card's own measured bf16 matmul rate.
2. Optimization ratios, each against the default configuration in the same call: contiguous
   vs channels_last, cudnn.benchmark off, foreach and for-loop SGD vs fused, torch.compile,
   CUDA graphs.
3. Input pipeline: the torch DataLoader backend (torchvision, this host's cores) vs synthetic,
   to see whether real data would starve the GPU.
4. Optionally the first baseline: `--record-baseline` runs the suite's full-profile 1n1g cases
   with --update-baselines into baselines/<hardware key>.json.

Each measurement is one worker run (torchrun, one process), exactly as the suite starts it.
Results go to stdout as tables and to `--output` as JSON.

    python tools/gpu_bench.py --iters 100 --output gpu_bench.json [--record-baseline]
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `tools` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from perf_tests.options import batch_list, precision_list, whole_number  # noqa: E402
from tools.cli import OneLineParser  # noqa: E402
from tools.worker_runs import REPO_ROOT, require_cuda, worker_run  # noqa: E402
# Forward 4.09 GMAC = 8.18 GFLOP per 224 px image; backward is about twice the forward.
TRAINING_GFLOP_PER_IMAGE = 3 * 2 * 4.089184256

MATMUL_PROBE = r"""
import time, torch
n = 8192
a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
for _ in range(5):
    a @ b
torch.cuda.synchronize()
start = time.perf_counter()
repeats = 50
for _ in range(repeats):
    a @ b
torch.cuda.synchronize()
print(2 * n ** 3 * repeats / (time.perf_counter() - start) / 1e12)
"""


def measure(settings: dict, runs: int) -> dict:
    records = [worker_run(settings) for _ in range(runs)]
    ok = [r["global_ips"] for r in records if r.get("outcome") == "ok"]
    failed = next((r for r in records if r.get("outcome") != "ok"), None)
    return {"settings": settings, "runs_ips": ok,
            "median_ips": statistics.median(ok) if ok else None,
            "outcome": "ok" if not failed else failed["outcome"],
            "message": failed.get("message") if failed else "",
            "throttled": any(r.get("throttled") for r in records),
            "gpu_state": next((r.get("gpu_state_during_window") for r in records
                               if r.get("gpu_state_during_window")), None)}


def table(title: str, header: tuple[str, ...], rows: list[tuple]) -> None:
    print(f"\n## {title}\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for row in rows:
        print("| " + " | ".join(str(cell) for cell in row) + " |")


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="gpu_bench.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=whole_number(1), default=3,
                        help="runs per measurement, their median reported (default 3)")
    parser.add_argument("--warmup", type=whole_number(0), default=20,
                        help="warm-up iterations a run (default 20)")
    parser.add_argument("--iters", type=whole_number(1), default=100,
                        help="timed iterations a run (default 100)")
    parser.add_argument("--batches", type=batch_list, default=(128, 256),
                        help="batches per device at 1n1g (default 128,256)")
    parser.add_argument("--precisions", type=precision_list, default=("fp32", "tf32", "amp", "bf16"),
                        help="precisions at 1n1g (default fp32,tf32,amp,bf16)")
    parser.add_argument("--skip", default="", help="comma list of parts to skip: "
                        "precisions,optimizations,input,baseline")
    parser.add_argument("--record-baseline", action="store_true",
                        help="also run the suite's 1n1g full-profile cases with "
                             "--update-baselines")
    parser.add_argument("--data-workers", type=whole_number(0),
                        default=len(os.sched_getaffinity(0)),
                        help="DataLoader workers for the torch backend (default: this host's cores)")
    parser.add_argument("--output", type=Path, default=Path("gpu_bench.json"))
    args = parser.parse_args(argv)
    require_cuda("gpu_bench.py")
    skip = set(filter(None, args.skip.split(",")))
    common = {"image_size": 224, "warmup_iters": args.warmup, "timed_iters": args.iters,
              "device": "cuda", "data_backend": "synthetic"}
    report: dict = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}

    peak = float(subprocess.run([sys.executable, "-c", MATMUL_PROBE], capture_output=True,
                                text=True, check=True).stdout.split()[-1])
    report["bf16_matmul_tflops"] = peak
    print(f"measured bf16 matmul: {peak:.0f} TFLOP/s")

    def mfu(ips):
        return ips * TRAINING_GFLOP_PER_IMAGE / 1e3 / peak if ips else None

    if "precisions" not in skip:
        rows, results = [], []
        for precision in args.precisions:
            for batch in args.batches:
                result = measure({**common, "precision": precision, "batch_per_device": batch},
                                 args.runs)
                results.append(result)
                utilization = mfu(result["median_ips"])
                rows.append((precision, batch, f"{result['median_ips'] or 0:.0f}",
                             f"{utilization:.1%}" if utilization else result["outcome"],
                             "yes" if result["throttled"] else "no"))
        report["precisions"] = results
        table("1n1g synthetic, channels_last", ("precision", "batch", "img/s", "MFU",
                                                "throttled"), rows)

    if "optimizations" not in skip:
        default = {**common, "precision": "bf16", "batch_per_device": 256}
        variants = {
            "default (channels_last, cudnn.benchmark, fused SGD)": {},
            "contiguous": {"memory_format": "contiguous"},
            "cudnn.benchmark off": {"cudnn_benchmark": False},
            "foreach SGD": {"optimizer_impl": "foreach"},
            "for-loop SGD": {"optimizer_impl": "for-loop"},
            "torch.compile": {"compile": True},
            "CUDA graphs": {"cuda_graphs": True},
            "torch.compile + CUDA graphs": {"compile": True, "cuda_graphs": True},
            "amp, dynamic loss scale": {"precision": "amp"},
            "amp, static loss scale": {"precision": "amp", "loss_scale": "static"},
        }
        results = {name: measure({**default, **change}, args.runs)
                   for name, change in variants.items()}
        base = results[next(iter(variants))]["median_ips"]
        report["optimizations"] = results
        table("bf16 b256 variants, ratio against the default", ("variant", "img/s", "ratio",
                                                                "MFU"),
              [(name, f"{r['median_ips'] or 0:.0f}",
                f"{r['median_ips'] / base:.3f}" if r["median_ips"] and base else r["outcome"],
                f"{mfu(r['median_ips']):.1%}" if r["median_ips"] else "-")
               for name, r in results.items()])

    if "input" not in skip:
        rows = []
        for backend in ("synthetic", "torch"):
            result = measure({**common, "precision": "bf16", "batch_per_device": 256,
                              "data_backend": backend, "data_workers": args.data_workers},
                             args.runs)
            report.setdefault("input", {})[backend] = result
            rows.append((backend, f"{result['median_ips'] or 0:.0f}", result["outcome"],
                         result["message"][:80]))
        table(f"input pipeline, bf16 b256, {args.data_workers} loader workers",
              ("backend", "img/s", "outcome", "message"), rows)

    if args.record_baseline and "baseline" not in skip:
        command = [sys.executable, "-m", "pytest", str(REPO_ROOT / "perf_tests"),
                   "--perf-profile", "full", "-k", "1n1g", "--perf-precisions",
                   ",".join(args.precisions), "--perf-batches", ",".join(map(str, args.batches)),
                   "--update-baselines",
                   "-p", "no:cacheprovider"]
        print("\n" + " ".join(command), flush=True)
        subprocess.run(command, cwd=REPO_ROOT, check=False)

    args.output.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
