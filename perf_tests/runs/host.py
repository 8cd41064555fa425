"""The host a session measures: its environment, probed once in a subprocess, and what it
cannot run (a precision its devices lack, a data backend whose package is missing, ...)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from perf_tests.containers import Image, path_origin
from perf_tests.core.cases import Case
from perf_tests.runs.agent import AGENT_EXIT_MARK
from perf_tests.runs.fork_servers import ServerFolder
from perf_tests.runs.launch import Host, Stack, one_node_command
from rn50_model.config import CPU_PRECISIONS
from rn50_model.gpu_fitness import gpu_name, unfit_clauses
from rn50_model.host_state import SERVERS_VARIABLE, load_reasons
from rn50_model.packages import compile_problem, data_backend_problem

PROBE_TIMEOUT_SECONDS = 120


class ProbeError(Exception):
    """The environment probe failed; one line naming the stack and what to check."""


def worker_environment(rootdir: Path) -> dict:
    """This process's environment with the repository importable: what every worker and probe
    is started with."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(rootdir), env.get("PYTHONPATH")]))
    return env


def probe_host(cwd: Path, stack: Stack = Stack(), role: str = "the candidate",
               servers: ServerFolder | None = None) -> dict:
    """The environment as a worker would see it, read in a subprocess so that this pytest
    process never creates a CUDA context of its own; `stack`: as a worker on it would (`role`:
    what the stack is to the session, for the error line); `servers`: the session's fork
    servers, whose first imports torch for the probe, then forks the workers."""
    return run_probe(cwd, "rn50_model.environment", stack, slow_hint="check that torch imports",
                     role=role, servers=servers)


def run_probe(cwd: Path, module: str, stack: Stack = Stack(), slow_hint: str = "",
              role: str = "the candidate", servers: ServerFolder | None = None) -> dict:
    """What `python -m <module>` prints as JSON, run as a worker is (on `stack`, in the workers'
    environment, inside its image with `cwd` mounted; with `servers`, forked by the suite's
    agent from a fork server, as one worker); ProbeError, one line naming the stack, where it
    does not."""
    what = "this host" if stack.is_default else f"{role} ({stack.describe()})"
    env = worker_environment(cwd)
    argv = [sys.executable, "-m", module]
    if servers is not None and stack.image is None:
        env[SERVERS_VARIABLE] = str(servers.path)
        argv = one_node_command(1, None, [], module)
    command = stack.wrap(argv, env, (cwd,), cwd)
    try:
        done = subprocess.run(command, cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=PROBE_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        raise ProbeError(f"probing {what} (python -m {module}) took over "
                         f"{PROBE_TIMEOUT_SECONDS} s" + (f"; {slow_hint}" if slow_hint else "")) \
            from None
    except OSError as error:
        raise ProbeError(f"probing {what}: {command[0]} cannot start "
                         f"({error.strerror or error})") from None
    if done.returncode != 0:
        # docker ends its own errors with where to read its help: the line before says why
        # ... and the suite's agent (a forked probe's) names the rank that failed after it
        lines = [line for line in done.stderr.strip().splitlines() if line.strip()
                 and not re.fullmatch(r"Run '\S+ \S+ --help' for more information", line)
                 and not line.startswith(AGENT_EXIT_MARK)]
        last = (lines or [f"no output, exit status {done.returncode}"])[-1]
        if stack.image is not None:
            image_problem(what, stack.image, last)
        missing = re.search(r"No module named '([^'.]+)", last)
        if missing and not stack.is_default:
            raise ProbeError(f"{what}: its python has no {missing[1]}; install {missing[1]} "
                             "there, or pick another stack")
        raise ProbeError(f"probing {what} (python -m {module}) failed: {last}")
    try:
        return json.loads(done.stdout)
    except ValueError:
        raise ProbeError(f"probing {what} (python -m {module}) printed no "
                         f"JSON: {(done.stdout.strip().splitlines() or [''])[-1][:200]}") \
            from None


def image_problem(what: str, image: Image, last: str) -> None:
    """ProbeError where a probe's last line says the image has no such interpreter, or that
    its interpreter lacks a module: the remedy names --perf-image-python and where the PATH
    it was looked up on comes from."""
    python = re.escape(image.python)
    lookup = f"{image.python} was looked up on {path_origin(image)}"
    if re.search(rf"execvp {python}: No such file|\"{python}\": executable file not found|"
                 rf"exec: {python}: not found|\b{python}: not found", last):
        raise ProbeError(f"{what}: it has no {image.python}; {lookup}; install Python and "
                         "torch there, name its interpreter with --perf-image-python PATH, or "
                         "pick another image")
    missing = re.search(r"No module named '([^'.]+)", last)
    if missing:
        raise ProbeError(f"{what}: its {image.python} has no {missing[1]}; {lookup}; install "
                         f"{missing[1]} there, name the interpreter that has it with "
                         "--perf-image-python PATH, or pick another image")


@dataclass(frozen=True)
class HostFacts:
    """The probed environment and what follows from it."""
    environment: dict

    @property
    def host(self) -> Host:
        devices = self.environment.get("device_count", 0)
        return Host("cuda" if devices > 0 else "cpu", devices,
                    self.environment.get("cpu_count") or os.cpu_count() or 1)

    @property
    def device_type(self) -> str:
        return self.host.device_type

    @property
    def hardware(self) -> str:
        return self.environment.get("hardware", "unknown")

    def compute_capability(self) -> tuple[int, ...]:
        """The first CUDA device's (major, minor); an unknown one is taken as new enough."""
        text = str(self.environment.get("compute_capability", ""))
        try:
            return tuple(int(part) for part in text.split("."))
        except ValueError:
            return (99, 0)

    def skip_reason(self, case: Case, profile_name: str, data_backend: str,
                    compile: bool) -> str | None:
        """Why this host cannot run `case` with these settings; None where it can."""
        if self.device_type == "cpu":
            if profile_name == "full":
                return ("the full profile measures CUDA devices and this host has none; use "
                        "--perf-profile smoke")
            if case.precision not in CPU_PRECISIONS:
                return (f"precision {case.precision} needs a CUDA device; this host has none "
                        f"(on CPU: {', '.join(CPU_PRECISIONS)})")
        elif case.precision in ("tf32", "bf16") and self.compute_capability() < (8, 0):
            return (f"precision {case.precision} needs compute capability 8.0 (Ampere) or "
                    f"newer; this host's {self.environment.get('device', 'GPU')} has "
                    f"{self.environment.get('compute_capability')}")
        reason = self.backend_problem(data_backend)
        if reason is None and compile:
            reason = compile_problem(self.device_type)
        return reason

    def preflight_line(self) -> str | None:
        """The line the session prints before its first case: what is off on this host by the
        probe's `preflight` (`preflight: GPU 3: power limit 400 W of 700 W default; 2 other
        processes (pid 4242, 4243)`), else that nothing is; None where the probe read none."""
        preflight = self.environment.get("preflight")
        if not isinstance(preflight, dict):
            return None
        gpus = preflight.get("gpus") or []
        off = self.preflight_off()
        count = f"{len(gpus)} GPU" + ("s" if len(gpus) > 1 else "")
        if not gpus:
            heading = ["no CUDA devices"]
        elif all(set(gpu) <= {"device"} for gpu in gpus):
            heading = [f"{count}, their state unknown (NVML unreadable)"]
        else:
            heading = [] if off else [f"{count}, nothing off"]
        return "preflight: " + "; ".join(heading + off)

    def preflight_off(self) -> list[str]:
        """What the probe's `preflight` found off on this host, one clause each (the load
        average over the cores, each GPU's unfit state); empty where nothing or none read."""
        preflight = self.environment.get("preflight")
        if not isinstance(preflight, dict):
            return []
        off = load_reasons(preflight.get("loadavg"), self.environment.get("cpu_count"))
        for gpu in preflight.get("gpus") or []:
            clauses = unfit_clauses(gpu)
            if clauses:
                name = gpu_name(gpu, fallback=f"GPU {gpu.get('device')}")
                off.append(f"{name}: {'; '.join(clauses)}")
        return off

    def backend_problem(self, data_backend: str) -> str | None:
        """Why `data_backend` cannot feed this host's workers (a CPU host for dali-gpu, a
        missing package); None where it can."""
        if data_backend == "dali-gpu" and self.device_type == "cpu":
            return "data backend dali-gpu needs a CUDA device; this host has none"
        return data_backend_problem(data_backend, self.environment)
