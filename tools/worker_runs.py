"""The GPU tools' way to run the workload: one worker run as the suite starts it (torchrun,
one process per device, a fresh run folder), its record or its failure back as a dict, and the
check that a CUDA device is there at all.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from perf_tests.processes import ProcessTree

REPO_ROOT = Path(__file__).resolve().parent.parent


class NeedsCuda(SystemExit):
    """A GPU tool started on a host without CUDA devices: one line on stderr, exit status 1."""

    def __init__(self, tool: str, why: str) -> None:
        super().__init__(f"{tool}: needs a CUDA device; {why} (run it on a GPU host)")


def require_cuda(tool: str) -> int:
    """The number of CUDA devices torch sees, or NeedsCuda where there is none. Counting does
    not create a CUDA context in this process (torch asks NVML first)."""
    try:
        import torch
    except ImportError as error:
        raise NeedsCuda(tool, f"torch does not import ({error})") from None
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        build = f"a CPU build of torch {torch.__version__}" if not torch.version.cuda else \
            f"torch {torch.__version__} with CUDA {torch.version.cuda}"
        raise NeedsCuda(tool, f"{build} sees none here")
    return count


def environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env.update(extra or {})
    return env


def worker_run(settings: dict, nproc: int = 1, extra_env: dict[str, str] | None = None,
               timeout: float = 900) -> dict:
    """One run of the worker with these TrainConfig fields on `nproc` devices: rank 0's record,
    else the first failing rank's failure record, else {"outcome": "error", "message": ...}.
    However it ends, no process it started outlives it (the suite's ProcessTree)."""
    with tempfile.TemporaryDirectory(prefix="rn50-worker-") as run_dir:
        run_path = Path(run_dir)
        config = run_path / "config.json"
        config.write_text(json.dumps(settings))
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                   "--nproc-per-node", str(nproc), "-m", "rn50_model.worker", "--config",
                   str(config), "--run-dir", run_dir, "--redirect-logs"]
        with ProcessTree() as tree:
            started = tree.start("torchrun", command, environment(extra_env), REPO_ROOT, run_path)
            waited = tree.wait(timeout)
        if waited.timed_out:
            live = "; ".join(waited.live_at_timeout) or "nothing left running"
            return {"outcome": "error", "message": f"no result after {timeout:.0f} s ({live})"}
        record = run_path / "record.json"
        if record.exists():
            return json.loads(record.read_text())
        failures = [json.loads(path.read_text()) for path in run_path.glob("rank*.failure.json")]
        if failures:
            return min(failures, key=lambda failure: failure.get("failed_at", 0))
        log = run_path / "rank0.log"
        source = log if log.exists() else started.stderr_path
        tail = source.read_text(errors="replace").splitlines()[-3:]
        return {"outcome": "error", "message": " | ".join(tail) or "no record and no log"}
