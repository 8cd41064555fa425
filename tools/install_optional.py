"""Install the optional packages (requirements-optional.txt) one at a time and say in one line
what could not be installed and what the suite does without it. `make perf` runs it after
requirements.txt, so a host that cannot reach a package index (the project's GPU machine) still
runs the suite with what it has; `make test` runs it with `--all`, since the suite's own tests
exercise every optional path.

    rn50-perf install-optional           # best effort: exit 0, one line on what is left out
    rn50-perf install-optional --all     # exit 1 when any is left out

DALI's wheel follows the CUDA release of the installed torch (nvidia-dali-cuda130 on CUDA 13).
"""
from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from rn50_model.packages import dali_distribution
from tools import moved_line
from tools.cli import OneLineParser
from tools.command import verb_command

REQUIREMENTS = Path(__file__).resolve().parent.parent / "requirements-optional.txt"
DALI = "nvidia-dali-cuda"
# What the suite does without each (by distribution name, DALI by its prefix).
WITHOUT = {DALI: "the dali-cpu and dali-gpu data backends skip",
           "ruptures": "the history tool finds no step changes",
           "mlperf-logging": "time-to-train writes no MLPerf log",
           "plotly": "the publish tool builds no history site"}
# One try, a bounded wait: a host with no index should hear so in seconds, not minutes.
PIP_OPTIONS = ["--retries", "1", "--timeout", "10", "--disable-pip-version-check"]


@dataclass(frozen=True)
class Requirement:
    spec: str   # `ruptures>=1.1`

    @property
    def name(self) -> str:
        return re.split(r"[<>=!~;\[ ]", self.spec, maxsplit=1)[0]

    @property
    def without(self) -> str:
        key = DALI if self.name.startswith(DALI) else self.name
        return WITHOUT.get(key, "what needs it skips")


def requirements(path: Path, cuda_version: str | None) -> list[Requirement]:
    """The file's requirements, DALI's renamed for this CUDA release."""
    found = []
    for line in path.read_text().splitlines():
        spec = line.split("#", 1)[0].strip()
        if spec.startswith(DALI):
            spec = dali_distribution(cuda_version) + spec[len(Requirement(spec).name):]
        if spec:
            found.append(Requirement(spec))
    return found


def torch_cuda_version() -> str | None:
    try:
        import torch
    except ImportError:
        return None
    return torch.version.cuda


def pip_install(spec: str) -> str | None:
    """None where pip installed `spec` (or found it installed), else pip's last error line."""
    done = subprocess.run([sys.executable, "-m", "pip", "install", *PIP_OPTIONS, spec],
                          capture_output=True, text=True)
    if done.returncode == 0:
        return None
    lines = [line.strip() for line in (done.stderr + done.stdout).splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR")]
    return (errors or lines or [f"pip exited {done.returncode}"])[-1]


def left_out_line(left_out: list[tuple[Requirement, str]]) -> str:
    """`make perf: left out nvidia-dali-cuda130 (the dali-cpu ... skip), ...; pip: ERROR: ...`"""
    names = ", ".join(f"{requirement.name} ({requirement.without})"
                      for requirement, _ in left_out)
    return (f"optional packages left out: {names}; the suite runs without them "
            f"(pip: {left_out[-1][1]})")


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog=verb_command("install-optional"),
                           description=__doc__.split("\n\n")[0])
    parser.add_argument("--all", action="store_true",
                        help="exit 1 when any optional package is left out (default: exit 0)")
    parser.add_argument("--requirements", type=Path, default=REQUIREMENTS,
                        help=f"the optional requirements (default {REQUIREMENTS.name})")
    args = parser.parse_args(argv)
    if not args.requirements.is_file():
        parser.error(f"--requirements {args.requirements}: no such file")

    wanted = requirements(args.requirements, torch_cuda_version())
    left_out = [(requirement, problem) for requirement in wanted
                if (problem := pip_install(requirement.spec))]
    if not left_out:
        print(f"optional packages installed: {', '.join(r.name for r in wanted)}", flush=True)
        return 0
    print(left_out_line(left_out), file=sys.stderr, flush=True)
    return 1 if args.all else 0


if __name__ == "__main__":
    raise SystemExit(moved_line("install_optional"))
