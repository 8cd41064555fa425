"""docs/gpu-hours/next-lease.sh's dry run on this CPU host, so that a change to an option or a
case the script uses fails here and not on the card: every command a step would run is parsed
with the suite's own parser (`settings_from_args`, the rules of `check`) or the GPU tool's, its
-k expression must pick the cases the step is for from the full profile, two ranks must not skip
on a host of one CUDA device, the fault must parse; and the default DEADLINE keeps what the
script's header says it keeps. Outside a dry run, on stand-ins for the card's sessions: the
runs' wall time against their window, and gloo after NCCL's refusal."""
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from perf_tests.cli.selection import keyword_selector
from perf_tests.cli.settings import check, settings_from_args
from perf_tests.core.cases import PROFILES
from perf_tests.runs.launch import Host
from perf_tests.runs.launchers import LocalLauncher
from rn50_model.config import TrainConfig
from rn50_model.faults import FAULT_VARIABLE, Fault
from tools.gpu.check import make_parser
from tools.gpu.steps import plan

SCRIPT = REPO_ROOT / "docs" / "gpu-hours" / "next-lease.sh"
LINE = re.compile(r"^\[(\d+) s\] (\S+) command: (.*)$")
# Only pytest's own words may follow the suite's options: a misspelt --perf-* option would land
# here (parse_known_args keeps what it does not know).
PYTEST_WORDS = {"-p", "no:cacheprovider", "-rs", "-k"}


def dry_run(tmp_path: Path, **env) -> tuple[list[str], list[Path]]:
    out = tmp_path / "out"
    done = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "DRY_RUN": "1", "OUT": str(out), **env})
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return done.stdout.splitlines(), sorted(out.iterdir())


def commands(lines: list[str]) -> list[tuple[int, str, list[str]]]:
    return [(int(match[1]), match[2], shlex.split(match[3]))
            for match in map(LINE.match, lines) if match]


@pytest.fixture(scope="module")
def every_step(tmp_path_factory):
    """The dry run with a deadline that keeps every step."""
    return dry_run(tmp_path_factory.mktemp("lease"), DEADLINE="100000")


def suite_command(argv: list[str], monkeypatch) -> tuple[object, list[str]]:
    """(the suite's settings, the cases its -k picks) of a `[env VAR=VALUE...] python3 -m pytest
    perf_tests ...` command; each variable set for the test (the fault parses as a worker's)."""
    while argv[0] == "env" or "=" in argv[0]:
        if argv[0] != "env":
            name, _, value = argv[0].partition("=")
            monkeypatch.setenv(name, value)
        argv = argv[1:]
    assert argv[:4] == ["python3", "-m", "pytest", "perf_tests"], argv
    settings, rest = settings_from_args(argv[4:])
    check(settings)
    assert set(rest) - PYTEST_WORDS == {rest[rest.index("-k") + 1]}, rest
    profile = settings.profile or PROFILES["full"]
    assert profile.name == "full"
    cases = profile.cases(settings.precisions, settings.batches) + list(settings.extra_cases)
    selects = keyword_selector(rest[rest.index("-k") + 1])
    picked = [case for case in cases if selects([case.case_id])]
    for case in picked:   # as a worker on the card would validate its config
        TrainConfig(batch_per_device=case.batch_per_device, precision=case.precision,
                    **settings.resolved(profile).train_values()).validate("cuda")
    return settings, picked


def test_every_command_parses_and_picks_the_cases_its_step_is_for(every_step, monkeypatch):
    lines, _ = every_step
    ran = commands(lines)
    assert [name for _, name, _ in ran] == ["S1", "S2"] + ["S3"] * 6 + ["S4", "S4", "S5"]
    picked_by = {}
    for _, name, argv in ran:
        if argv[:3] == ["python3", "-m", "tools"]:
            assert argv[3] == "gpu-check"
            options = make_parser().parse_args(argv[4:])
            assert options.steps.split(",") == ["environment", "peaks"]
            assert set(options.steps.split(",")) <= {step.name for step in plan()}
            continue
        with monkeypatch.context() as scope:
            settings, picked = suite_command(argv, scope)
            fault = Fault.from_environment(256) if FAULT_VARIABLE in os.environ else None
        picked_by.setdefault(name, []).append((picked, settings, fault))
    picked_by = {name: [([case.case_id for case in cases], settings, fault)
                        for cases, settings, fault in sessions]
                 for name, sessions in picked_by.items()} | {"S4 cases": picked_by["S4"][0][0]}
    [(ids, baseline, _)] = picked_by["S2"]
    assert ids == ["1n1g_amp_b256"] and baseline.runs == 10 and baseline.update_baselines
    gates = picked_by["S3"]
    assert [ids for ids, _, _ in gates] == [["1n1g_amp_b256"]] * 6
    assert all(settings.runs == 5 and settings.max_runs == 5 for _, settings, _ in gates)
    # Alternated: no fault, then 2% slower, in every pair.
    assert [fault and (fault.kind, fault.share) for _, _, fault in gates] == \
        [None, ("slow", 0.02)] * 3
    nccl, gloo = picked_by["S4"]
    assert nccl[0] == gloo[0] == ["1n2g_amp_b256"]
    assert (nccl[1].dist_backend, gloo[1].dist_backend) == ("auto", "gloo")
    one_card = Host("cuda", 1, 16, share_devices=nccl[1].share_devices)
    [two_ranks] = picked_by["S4 cases"]
    assert LocalLauncher().skip_reason(two_ranks, one_card) is None
    [(ids, compiled, _)] = picked_by["S5"]
    assert ids == ["1n1g_amp_b256", "1n1g_amp_b512"] and compiled.compile


def test_the_default_deadline_keeps_the_baseline_and_one_pair(tmp_path):
    lines, files = dry_run(tmp_path)
    ran = commands(lines)
    assert [name for _, name, _ in ran] == ["S1", "S2", "S3", "S3"]
    assert ran[-1][0] + 136 <= 570   # the last session's plan ends before the deadline
    assert "[567 s] S3 pair 2 skipped: planned 272 s, 3 s left" in lines
    assert "[567 s] S4 skipped: planned 120 s, 3 s left" in lines
    assert "[567 s] S5 skipped: planned 190 s, 3 s left" in lines
    # gpu.md's limit: at most 8 files beside summary.txt.
    assert len([path for path in files if path.name != "summary.txt"]) <= 8


def test_a_second_call_picks_its_steps(tmp_path):
    lines, _ = dry_run(tmp_path, STEPS="S4", DEADLINE="150")
    assert [name for _, name, _ in commands(lines)] == ["S4", "S4"]
    lines, _ = dry_run(tmp_path, STEPS="S4", DEADLINE="100")
    assert "[0 s] S4 skipped: planned 120 s, 100 s left" in lines


# A stand-in for the card's sessions, for the script's own logic outside a dry run: `python3 -m
# pytest` leaves one run record (a 25 s launch, a 4.2 s window) and, for two ranks on NCCL, fails
# as NCCL refuses a duplicate device; every other python3 command is the real interpreter.
STAND_IN = """#!/bin/bash
if [ "$1 $2" != "-m pytest" ]; then exec {python} "$@"; fi
results=$(echo "$*" | sed -E 's/.*--perf-results ([^ ]+).*/\\1/')
if [[ "$*" == *share-devices=on* && "$*" != *dist-backend=gloo* ]]; then
    echo "1n2g_amp_b256: rank 1: error: {refusal}"
    exit 1
fi
mkdir -p "$results/case"
echo '{{"launch_seconds": 25.0, "record": {{"elapsed_s": 4.2}}}}' > "$results/case/run-1.json"
echo "1n1g_amp_b256: pass"
"""


REFUSAL = "Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1000"


def test_on_a_card_the_split_is_read_and_gloo_follows_nccls_refusal(tmp_path):
    stand_ins = tmp_path / "bin"
    stand_ins.mkdir()
    for name, text in (("python3", STAND_IN.format(python=sys.executable, refusal=REFUSAL)),
                       ("nvidia-smi", "#!/bin/sh\necho 'NVIDIA H200, 580.159.04, 143771 MiB'\n")):
        (stand_ins / name).write_text(text)
        (stand_ins / name).chmod(0o755)
    out = tmp_path / "out"
    done = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PATH": f"{stand_ins}:{os.environ['PATH']}",
                               "OUT": str(out), "STEPS": "S2,S4"})
    assert done.returncode == 0, done.stderr
    summary = [line.split("] ", 1)[1] for line in (out / "summary.txt").read_text().splitlines()]
    assert "S2 wall time: 1 runs: 25.0 s a run's launch (median), its timed window 4.20 s; " \
           "the rest is unsplit (the suite records no finer split yet)" in summary
    assert f"S4: NCCL with two ranks on one device: 1n2g_amp_b256: rank 1: error: {REFUSAL}" \
        in summary
    ran = [argv for _, name, argv in commands([f"[0 s] {line}" for line in summary])
           if name == "S4"]
    assert [("--perf-set", "dist-backend=gloo") in zip(argv, argv[1:]) for argv in ran] == \
        [False, True]
    assert sorted(path.name for path in out.iterdir()) == ["output.log", "results.tgz",
                                                           "summary.txt"]
