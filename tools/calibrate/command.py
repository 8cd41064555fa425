"""Calibrate the gate on this machine: false alarms on unchanged code, detection of real slowdowns.

Records a baseline for the chosen cases once, then repeats the gate (a real `pytest perf_tests`
session against that baseline) K times per scenario and counts the verdicts:

- unchanged: nothing differs; every regression is a false alarm;
- taskset: the whole session pinned to one core (`taskset -c 0`), as a container given fewer
  CPUs would be;
- contiguous: contiguous tensors instead of channels_last (`--perf-set memory-format=contiguous`);
- one-thread: one CPU thread per worker (`--perf-set threads=1`);
- periodic-hog: nothing differs but the host, busy half the time (two busy loops, 20 s on, 20 s
  off: tools/host_load.py); every regression blames the software for the host, and the
  `host-unfit` column counts the sessions that named the host instead;
- slow-2x-band: the worker's fault knob RN50_FAULT=slow@share=S with S twice the band the first
  `unchanged` session stated (or `--slow-share S`): a slowdown the auto band
  (perf_tests/judging/tolerance_band.py) must catch in at least 19 of 20 sessions.

Before the scenarios, `--host-sessions N` (default 10) unchanged sessions measure how far apart
this host's sessions lie with nothing changed (perf_tests/baselines/host_shift.py): how far apart
their medians and the baseline's lie is kept in the baseline's entries, and every auto band after
counts it; `--write-host-shift FILE` keeps it in the gates' own baseline file too. Every session
is written into the work folder, where each later gate finds it beside its own results folder
and learns the host's movement from it (perf_tests/results/history.py), as a gate does from
`perf_results/`: `--history-sessions N` runs N unchanged sessions for that alone (with
`--host-sessions 0`: the gate with no calibrate step, its band from its history).

With `--replay` it measures nothing: it replays the GPU hours' recorded runs
(docs/gpu-hours/run-sets.json) through the gate's protocol at slowdowns of 0, 1, 2 and 3%, in
sessions of 3, 5 and 10 runs, each after `--history-sessions` (10) unchanged ones its band learns
from (perf_tests/judging/protocol_replay.py), and prints what the rule caught.

With `--ab` it calibrates A/B sessions instead (no baseline: each session runs this stack and a
candidate in ABBA pairs): `identical` (the candidate is this very interpreter: every regression is
a false alarm) and candidates whose environment slows OpenMP, malloc, oneDNN or ATen down for real
(`gomp-spin-700` and `gomp-spin-500`: GOMP_SPINCOUNT=700 or 500, `malloc-perturb`:
MALLOC_PERTURB_=165, `avx2`: DNNL_MAX_CPU_ISA=AVX2, `aten-default`: ATEN_CPU_CAPABILITY=default,
`no-primitive-cache`: ONEDNN_PRIMITIVE_CACHE_CAPACITY=0). GOMP_SPINCOUNT's cost moves with
the host's own load, so one scenario is of known size instead: `slow-10`, the worker's documented
fault knob RN50_FAULT=slow@share=0.1 (every step followed by an idle wait of 1/9 of its own
duration: nominally 10% less throughput; 11.8% measured, README), for the power of the protocol.

Apart from `slow-10`, no sleeps or fake delays: each slowdown is the real program running
slower. Every gate run is appended to `<work dir>/calibration.json` as it ends; the table is
printed at the end, each scenario's regressions beside the median slowdown its sessions said
they could have detected (`detects`: results.json's `min_detectable_slowdown`), so that figure
is checked against what was detected. The work folder (`--work-dir`, default a new folder under
the system's temporary folder) is named at the start. Options and the pytest options after `--`
are checked, and the selection must name at least one case, before anything is measured.

    rn50-perf calibrate --repeats 20 -k 1n1g_fp32
    rn50-perf calibrate --repeats 20 -k 1n1g_fp32 --scenarios unchanged,slow-2x-band
    rn50-perf calibrate --scenarios unchanged --repeats 1 --write-host-shift baselines/vm.json
    rn50-perf calibrate --repeats 20 -k 1n1g_fp32 --host-sessions 0 --history-sessions 10 \
        --scenarios unchanged,slow-2x-band
    rn50-perf calibrate --replay
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from perf_tests.baselines.file import BaselineError, record_host_shifts
from perf_tests.baselines.host_shift import measured_shift
from perf_tests.cli.values import fraction, whole_number
from perf_tests.judging.tolerance_band import band_percent
from perf_tests.core.row_values import rows_of
from tools.calibrate.tables import (REPLAY_HISTORY, REPLAYED_SESSIONS, kept_row, print_replay,
                                   print_table, summarize)
from tools.cli import SUITE_ROOT, OneLineParser, add_work_dir, refuse_used_work_dir
from tools.command import verb_command
from tools.inputs import InputError, read_results_file, refused

PROG = verb_command("calibrate")
SLOW_TWICE_BAND = "slow-2x-band"

SCENARIOS = {
    "unchanged": ([], []),
    "taskset": (["taskset", "-c", "0"], []),
    "contiguous": ([], ["--perf-set", "memory-format=contiguous"]),
    "one-thread": ([], ["--perf-set", "threads=1"]),
    # The software unchanged, the host busy half the time: two busy loops beside the session,
    # 20 s on and 20 s off (tools/host_load.py), longer than a smoke run (about 17 s), so some
    # timed windows fall in the busy half and some do not. (10 s on, 20 s off missed every
    # window of 11 runs: the loops slowed each run's start-up until its short window fell in
    # the quiet part.) Every regression blames the software for the host; the runs the loops
    # overlapped should be marked and the case host-unfit.
    "periodic-hog": ([sys.executable, "-m", "tools", "host-load", "--loops", "2", "--on", "20",
                      "--off", "20", "--"], []),
    # The fault knob at twice the band the first unchanged session stated (`slow_share`).
    SLOW_TWICE_BAND: ([], []),
}
SLOWEST_SHARE = 0.9

# Candidates whose environment slows the CPU training down for real, by how much one A/B session
# of the smoke 1n1g_fp32_b8 measured on the 2-core VM (README, "A/B on one host"). GOMP_SPINCOUNT
# is how long libgomp's threads spin before they sleep at a barrier (default 300000): a short
# spin makes each of the model's parallel regions wake sleeping threads.
AB_SCENARIOS = {
    "identical": ["--perf-candidate-python", sys.executable],
    "gomp-spin-700": ["--perf-candidate-env", "GOMP_SPINCOUNT=700"],       # ~10%
    "gomp-spin-500": ["--perf-candidate-env", "GOMP_SPINCOUNT=500"],       # ~15%
    "malloc-perturb": ["--perf-candidate-env", "MALLOC_PERTURB_=165"],     # ~18%
    "avx2": ["--perf-candidate-env", "DNNL_MAX_CPU_ISA=AVX2"],              # ~50%
    "aten-default": ["--perf-candidate-env", "ATEN_CPU_CAPABILITY=default"],
    "no-primitive-cache": ["--perf-candidate-env", "ONEDNN_PRIMITIVE_CACHE_CAPACITY=0"],
    # Not a library setting: the worker's fault knob, exactly 10% (rn50_model.faults.Fault).
    "slow-10": ["--perf-candidate-env", "RN50_FAULT=slow@share=0.1"],
}


class CalibrationError(Exception):
    """A calibration that cannot run; one line saying why and what to do."""


def pytest_command(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "pytest", str(SUITE_ROOT / "perf_tests"), "-q",
            "-p", "no:cacheprovider", *args]


def selected_cases(args: list[str]) -> list[str]:
    """The case ids the gate sessions will measure, by collecting them: a bad pytest option or a
    selection of nothing is found here, in seconds, instead of after the baseline's runs."""
    with tempfile.TemporaryDirectory(prefix="rn50-calibration-collect-") as scratch:
        done = subprocess.run(pytest_command(["--collect-only", "--perf-results",
                                              str(Path(scratch) / "results"), *args]),
                              cwd=SUITE_ROOT, capture_output=True, text=True)
    output = (done.stdout + done.stderr).splitlines()
    case_ids = [line.rsplit("[", 1)[1].rstrip("]") for line in output
                if "::test_training_throughput[" in line]
    if done.returncode not in (0, 5):
        problem = next((line for line in reversed(output) if "error" in line.lower()),
                       output[-1] if output else f"exit status {done.returncode}")
        raise CalibrationError("pytest perf_tests does not start with these options: "
                               f"{problem.split('error: ', 1)[-1].strip()}")
    return case_ids


def pytest_session(prefix: list[str], args: list[str], results: Path) -> dict:
    command = [*prefix, *pytest_command(["--perf-results", str(results), *args])]
    started = time.monotonic()
    done = subprocess.run(command, cwd=SUITE_ROOT, capture_output=True, text=True)
    results_file = results / "results.json"
    if not results_file.exists():
        last = ((done.stdout + done.stderr).strip().splitlines() or ["no output"])[-1]
        raise CalibrationError(f"the session in {results} wrote no results ({last.strip()}); "
                               f"rerun it to see why: {' '.join(command)}")
    document = read_results_file(results_file, "session results")
    return {"exit_code": done.returncode, "seconds": round(time.monotonic() - started, 1),
            "cases": {case_id: kept_row(row)
                      for case_id, row in rows_of(document["cases"]).items()}}


def medians_text(session: dict) -> str:
    """'1n1g_fp32_b8 19.80 (17.2 s)': a gate session's median img/s per case, and its time."""
    return ", ".join(f"{case_id} {row.median_ips or 0:.2f}" for case_id, row in
                     rows_of(session["cases"]).items()) + f" ({session['seconds']} s)"


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog=PROG, description=__doc__.split("\n\n")[0],
                           epilog="Arguments after -- go to every pytest session.")
    parser.add_argument("--repeats", type=whole_number(1),
                        help="gate runs per scenario (default 20); with --replay, replayed "
                             "sessions per cell of its table (default 500)")
    parser.add_argument("-k", dest="select", default="1n1g_fp32",
                        help="cases, as pytest -k (default 1n1g_fp32)")
    parser.add_argument("--scenarios", default=None,
                        help=f"comma list of {', '.join(SCENARIOS)}; with --ab of "
                             f"{', '.join(AB_SCENARIOS)} (default all)")
    parser.add_argument("--ab", action="store_true",
                        help="calibrate A/B sessions (a candidate stack against this one, runs "
                             "interleaved) instead of the stored-baseline gate (default off)")
    parser.add_argument("--slow-share", type=fraction,
                        help=f"the {SLOW_TWICE_BAND} scenario's share of each step spent idle "
                             "(default: twice the band the first unchanged session stated)")
    parser.add_argument("--replay", action="store_true",
                        help="measure nothing: replay the GPU hours' recorded runs "
                             "(docs/gpu-hours/run-sets.json) through the gate's protocol at "
                             "slowdowns of 0-3%% and print what it caught (default off)")
    parser.add_argument("--baseline-runs", type=whole_number(1),
                        help="runs behind the baseline entry (default: what "
                             "--perf-update-baselines records, 10)")
    parser.add_argument("--host-sessions", type=whole_number(0), default=10,
                        help="unchanged sessions before the scenarios that measure how far "
                             "apart this host's sessions lie with nothing changed; the shift is "
                             "kept in the baseline's entries, and each auto band counts it "
                             "(default 10; 0: none)")
    parser.add_argument("--history-sessions", type=whole_number(0),
                        help="unchanged sessions after the baseline (and the host's sessions) "
                             "that every scenario's gate learns the host's movement from, as a "
                             "gate learns it from the sessions beside its results folder "
                             "(default 0); with --replay, the earlier sessions each replayed "
                             f"session's band learns from (default {REPLAY_HISTORY})")
    parser.add_argument("--write-host-shift", type=Path, metavar="FILE",
                        help="also keep the measured shifts in this baseline file's entries of "
                             "the same cases (default: only the calibration's own baseline)")
    add_work_dir(parser, "the baseline, sessions and calibration.json")
    parser.add_argument("pytest_args", nargs="*", help="more pytest options, after --")
    return parser


def work_folder(requested: Path | None) -> Path:
    """The folder to write into: the user's (checked new or empty), else a new temporary one."""
    try:
        if requested is None:
            return Path(tempfile.mkdtemp(prefix="rn50-calibration-"))
        requested.mkdir(parents=True, exist_ok=True)
        return requested.resolve()
    except OSError as error:
        raise CalibrationError(f"--work-dir {requested or tempfile.gettempdir()} cannot be "
                               f"created ({error.strerror or error}); pass a writable folder") \
            from None


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.replay:
        print_replay(args.repeats or REPLAYED_SESSIONS,
                     REPLAY_HISTORY if args.history_sessions is None else args.history_sessions)
        return 0
    args.repeats = args.repeats or 20
    known = AB_SCENARIOS if args.ab else SCENARIOS
    chosen = args.scenarios if args.scenarios is not None else ",".join(known)
    scenarios = list(dict.fromkeys(name.strip() for name in chosen.split(",") if name.strip()))
    unknown = [name for name in scenarios if name not in known]
    if unknown or not scenarios:
        parser.error(f"argument --scenarios: {chosen!r} names "
                     f"{', '.join(unknown) or 'no scenario'}; use a comma list of "
                     f"{', '.join(known)}{' (with --ab)' if args.ab else ''}")
    if SLOW_TWICE_BAND in scenarios and args.slow_share is None and (
            "unchanged" not in scenarios
            or scenarios.index("unchanged") > scenarios.index(SLOW_TWICE_BAND)):
        parser.error(f"argument --scenarios: {SLOW_TWICE_BAND} takes twice the band the first "
                     "unchanged session states; list unchanged before it, or give --slow-share")
    if "taskset" in scenarios and not shutil.which("taskset"):
        parser.error("argument --scenarios: the taskset scenario needs taskset (util-linux); "
                     "install it or leave taskset out")
    if args.history_sessions and args.ab:
        parser.error("argument --history-sessions: A/B sessions judge no baseline, and learn "
                     "nothing from earlier sessions; leave it out with --ab")
    if args.write_host_shift and (args.ab or not args.host_sessions):
        parser.error("argument --write-host-shift: the host's shift is measured by the gate's "
                     "calibration with --host-sessions 1 or more (not with --ab)")
    if args.write_host_shift and not args.write_host_shift.is_file():
        parser.error(f"argument --write-host-shift: {args.write_host_shift} is not a file; pass "
                     "the baseline file the gates read")
    refuse_used_work_dir(parser, args.work_dir)
    try:
        return calibrate_ab(args, scenarios) if args.ab else calibrate(args, scenarios)
    except (CalibrationError, InputError) as error:
        return refused(PROG, error)


def calibrate(args: argparse.Namespace, scenarios: list[str]) -> int:
    case_ids, work = prepared_work(args)
    baseline_file = work / "baseline.json"
    common = ["-k", args.select, "--perf-baseline-file", str(baseline_file), *args.pytest_args]
    runs = ["--perf-runs", str(args.baseline_runs)] if args.baseline_runs else []
    print(f"recording the baseline of {', '.join(case_ids)}", flush=True)
    # Calibration measures the gate against whatever baseline these runs give, few or noisy.
    pytest_session([], [*common, "--perf-update-baselines=force", *runs],
                   work / "baseline-session")
    log = {"select": args.select, "pytest_args": args.pytest_args, "gates": {}}
    if args.host_sessions:
        measure_host_shift(args, common, work, baseline_file, log)
    for number in range(1, (args.history_sessions or 0) + 1):
        session = pytest_session([], common, work / f"history-{number}")
        log.setdefault("history_sessions", []).append(session)
        print(f"history {number}/{args.history_sessions}: {medians_text(session)}", flush=True)
    baseline = json.loads(baseline_file.read_text())
    log["baseline"] = baseline
    def session_of(scenario: str) -> tuple[list[str], list[str]]:
        prefix, extra = SCENARIOS[scenario]
        if scenario == SLOW_TWICE_BAND:
            share = slow_share(args, log)
            prefix = ["env", f"RN50_FAULT=slow@share={share:.4f}"]
        return prefix, [*common, *extra]

    return run_scenarios(
        args, scenarios, work, log, baseline, session_of,
        lambda row: (f"{row.verdict} {row.median_ips or 0:.2f} (tolerance "
                     f"{band_percent(row.tolerance) if row.tolerance else '-'})"))


def measure_host_shift(args: argparse.Namespace, common: list[str], work: Path,
                       baseline_file: Path, log: dict) -> None:
    """`--host-sessions` unchanged sessions against the new baseline, before any scenario: the
    spread of their medians and each entry's is the host's shift between sessions
    (perf_tests/baselines/host_shift.py), kept in the baseline's entries, so that every
    scenario's auto band counts it, and in `--write-host-shift FILE`'s."""
    medians: dict[str, list[float]] = {}
    for number in range(1, args.host_sessions + 1):
        session = pytest_session([], common, work / f"host-shift-{number}")
        log.setdefault("host_shift_sessions", []).append(session)
        for case_id, row in rows_of(session["cases"]).items():
            if row.median_ips:
                medians.setdefault(case_id, []).append(row.median_ips)
        print(f"host shift {number}/{args.host_sessions}: {medians_text(session)}", flush=True)
    entries = json.loads(baseline_file.read_text()).get("entries") or {}
    shifts = {case_id: measured_shift(entries[case_id]["median_ips"], values)
              for case_id, values in medians.items() if case_id in entries}
    log["host_shift"] = shifts
    for case_id, shift in shifts.items():
        print(f"host shift of {case_id}: {band_percent(shift['fraction'])} (the fastest over "
              f"the slowest median of the baseline's {entries[case_id]['median_ips']:.2f} img/s "
              f"and {shift['sessions']} unchanged sessions')", flush=True)
    try:
        record_host_shifts(baseline_file, shifts)
        if args.write_host_shift:
            for case_id in record_host_shifts(args.write_host_shift, shifts):
                print(f"{PROG}: {args.write_host_shift} has no entry {case_id}; its host shift "
                      "is not kept there (record the case first)", file=sys.stderr)
            print(f"host shifts kept in {args.write_host_shift}", flush=True)
    except BaselineError as error:
        raise CalibrationError(str(error)) from None


def slow_share(args: argparse.Namespace, log: dict) -> float:
    """The slow-2x-band scenario's share: --slow-share, else twice the band the first unchanged
    session stated (its cases' median), at most SLOWEST_SHARE; decided once, kept in the log."""
    if "slow_share" not in log:
        if args.slow_share is not None:
            log["slow_share"] = args.slow_share
        else:
            first = rows_of(log["gates"]["unchanged"][0]["cases"]).values()
            bands = [row.tolerance for row in first if row.tolerance is not None]
            if not bands:
                raise CalibrationError("the first unchanged session stated no band (no case "
                                       "had a baseline); give --slow-share")
            log["slow_share"] = min(SLOWEST_SHARE, 2 * statistics.median(bands))
            print(f"{SLOW_TWICE_BAND}: RN50_FAULT=slow@share={log['slow_share']:.4f}, twice "
                  f"the {band_percent(statistics.median(bands))} band the first unchanged "
                  "session stated", flush=True)
    return log["slow_share"]


def calibrate_ab(args: argparse.Namespace, scenarios: list[str]) -> int:
    """Repeated A/B sessions per scenario; no baseline is recorded or read."""
    _, work = prepared_work(args)
    log = {"mode": "ab", "select": args.select, "pytest_args": args.pytest_args, "gates": {}}
    return run_scenarios(
        args, scenarios, work, log, None,
        lambda scenario: ([], ["-k", args.select, *AB_SCENARIOS[scenario], *args.pytest_args]),
        lambda row: f"{row.verdict} ratio {row.ratio or 0:.3f} ({row.pairs} pairs)")


def prepared_work(args: argparse.Namespace) -> tuple[list[str], Path]:
    """The case ids `-k` selects (one line where none) and the work folder, announced."""
    case_ids = selected_cases(["-k", args.select, *args.pytest_args])
    if not case_ids:
        raise CalibrationError(f"-k {args.select!r} selects no case of the suite; list them with "
                               "pytest perf_tests --collect-only -q")
    work = work_folder(args.work_dir)
    print(f"work folder: {work}", flush=True)
    return case_ids, work


def run_scenarios(args: argparse.Namespace, scenarios: list[str], work: Path, log: dict,
                  baseline: dict | None, session_of, describe) -> int:
    """Each scenario's gate sessions (`session_of(scenario)`: the command prefix and pytest
    arguments), logged as each ends; then the table of verdicts per scenario. The scenarios
    take turns (round 1 of each, then round 2, ...), so the host's drift over the hours of a
    calibration falls on every scenario alike, and a calibration stopped early has as many
    sessions of each."""
    for repeat in range(1, args.repeats + 1):
        for scenario in scenarios:
            prefix, pytest_args = session_of(scenario)
            gate = pytest_session(prefix, pytest_args, work / f"{scenario}-{repeat}")
            log["gates"].setdefault(scenario, []).append(gate)
            (work / "calibration.json").write_text(json.dumps(log, indent=2) + "\n")
            verdicts = ", ".join(f"{case_id} {describe(row)}"
                                 for case_id, row in rows_of(gate["cases"]).items())
            print(f"{scenario} {repeat}/{args.repeats}: {verdicts} ({gate['seconds']} s)",
                  flush=True)
    rows = [row for scenario in scenarios
            for row in summarize(scenario, log["gates"][scenario], baseline)]
    log["summary"] = rows
    (work / "calibration.json").write_text(json.dumps(log, indent=2) + "\n")
    print_table(rows, baseline)
    print(f"calibration log: {work / 'calibration.json'}")
    return 0
