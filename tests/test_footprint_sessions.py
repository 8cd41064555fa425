"""Peak memory beside speed, and a failure that reproduces itself, in real sessions: a baseline
records the case's peak memory; the same case holding half that much more (the worker's
documented knob `RN50_FAULT=grow@mib=N`: real memory, written, through the timed window) fails
with the memory line however fast it ran, and its line ends with the command that measures it
alone; that command, run as printed, fails the same way on that case alone."""
import json
import math
import re
import shlex
import shutil
import subprocess

import pytest

from conftest import READS_TINY_RECORDING, TINY_CASE_ARGS

pytestmark = pytest.mark.slow

CASE = "1n1g_fp32_b2"
ARGS = ("-k", "1n1g", "--perf-batches", "2", *TINY_CASE_ARGS)
# The throughput is not what these tests are about: a band no run misses beside another xdist
# worker (the repro command must carry it, as every option that shaped the verdict).
WIDE = ("--perf-tolerance", "0.9")
# The growth, as a share of the peak the baseline recorded: a fixed 300 MiB was 37% of this CPU
# build's resident set here and would be less than the 30% asserted below where torch's resident
# set is larger. Half the recorded peak is 50% on any build, five times the 10% tolerance.
GROWTH_SHARE = 0.5


def junit_case(path):
    """CASE's testcase and its properties in a --junitxml file, by junitparser's default
    reader (the properties are the testsuite's, named after the case)."""
    junitparser = pytest.importorskip("junitparser")
    [suite] = junitparser.JUnitXml.fromfile(str(path))
    [testcase] = [case for case in suite if case.name.endswith(f"[{CASE}]")]
    prefix = f"{CASE}:"
    return testcase, {prop.name[len(prefix):]: prop.value for prop in suite.properties()
                      if prop.name.startswith(prefix)}


def growth(peak_bytes: int) -> str:
    return f"grow@mib={math.ceil(GROWTH_SHARE * peak_bytes / 2 ** 20)}"


@READS_TINY_RECORDING
def test_a_memory_growth_fails_with_its_line_and_its_repro_reproduces_it(tiny_recording,
                                                                         run_suite, tmp_path,
                                                                         monkeypatch):
    recorded = tiny_recording   # CASE, as ARGS select it, recorded from two runs
    assert recorded.outcome.ret == 0, recorded.output
    baseline_file = tmp_path / "cpu.json"   # a copy: the recording's other readers read it
    shutil.copy(recorded.baseline_file, baseline_file)
    entry = recorded.baseline()["entries"][CASE]
    row = recorded.cases[CASE]
    assert entry["peak_memory_bytes"] == row["peak_memory_bytes"] > 100 * 2 ** 20
    assert entry["peak_memory_covers"] == "whole process (peak resident set size)"
    assert "joules_per_image" not in entry   # a CPU has no energy counter
    assert len(row["runs_peak_memory_bytes"]) == 2

    # One run a session from here on: a process's peak resident set is the same run to run
    # within a few percent, far inside the 10% tolerance and far from the growth.
    same = run_suite(*ARGS, *WIDE, "--perf-runs", "1", baseline_file=baseline_file)
    assert same.outcome.ret == 0, same.output
    assert abs(same.cases[CASE]["memory_delta"]) < 0.10 and "repro" not in same.cases[CASE]

    monkeypatch.setenv("RN50_FAULT", growth(entry["peak_memory_bytes"]))
    grown = run_suite(*ARGS, *WIDE, "--perf-runs", "1", "--junitxml",
                      str(tmp_path / "grown.xml"), baseline_file=baseline_file)
    assert grown.outcome.ret == 1, grown.output
    row = grown.cases[CASE]
    assert row["verdict"] == "regression" and row["memory_delta"] > 0.3
    assert row["throughput_verdict"] in ("pass", "improvement")
    # Issue 65: the JUnit file, as junitparser's default reader sees it, says which measure.
    testcase, properties = junit_case(tmp_path / "grown.xml")
    assert testcase.is_failure
    assert (properties["verdict"], properties["peak-memory_verdict"]) == ("regression",
                                                                           "regression")
    assert properties["throughput_verdict"] == row["throughput_verdict"]
    assert "profiling operators" not in grown.output   # no slowdown to explain
    line = next(line for line in grown.output.splitlines()
                if line.startswith(f"{CASE}: peak memory"))
    memory = r"[\d.]+ [MG]iB"   # MiB or GiB, as the worker's resident set on this CPU is
    assert re.match(rf"{CASE}: peak memory \(RSS of the worker process, its largest rank\) "
                    rf"{memory} -> {memory} \(\+\d+%, tolerance 10%\); "
                    rf"throughput: [\d.]+ img/s, [+-][\d.]+% against the baseline ", line), line
    repro = line.split("; repro: ", 1)[1]
    assert row["repro"] == repro
    report = (grown.results_dir / "report.md").read_text()
    assert f"; repro: `{repro}`" in report
    words = shlex.split(repro.split(" && ", 1)[-1])
    # The fault knob is a variable the verdict compares: the repro sets it, as a fresh shell
    # lacks it.
    assert words[:2] == ["env", f"RN50_FAULT={growth(entry['peak_memory_bytes'])}"]
    test_id = words.index("pytest") + 1
    assert words[test_id] == \
        f"perf_tests/test_resnet50_training.py::test_training_throughput[{CASE}]"
    assert words[test_id + 1:test_id + 3] == ["--perf-baseline-file", str(baseline_file)]
    for option in ("--perf-tolerance 0.9", "--perf-runs 1", "--perf-set threads=1",
                   "--perf-ignore-host-state"):
        assert option in repro
    assert "--perf-results" not in repro and "-k" not in words

    # As printed (its results folder named, so that it does not land in the repository).
    again = tmp_path / "again"
    done = subprocess.run(f"{repro} --perf-results {again}", shell=True, capture_output=True,
                          text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed" in done.stdout and "passed" not in done.stdout
    reproduced = json.loads((again / "results.json").read_text())["cases"]
    assert list(reproduced) == [CASE]
    assert reproduced[CASE]["verdict"] == "regression"
    assert reproduced[CASE]["memory_regression"].startswith(f"{CASE}: peak memory ")

    # Refreshing the baseline with the grown memory (issue 63): the gate fails these runs on
    # memory, so the refresh records nothing unless forced, and says which measure.
    kept = baseline_file.read_bytes()
    refused = run_suite(*ARGS, *WIDE, "--perf-update-baselines", "--perf-runs", "1",
                        "--perf-explain", "never", baseline_file=baseline_file)
    assert refused.outcome.ret == 1, refused.output
    assert baseline_file.read_bytes() == kept
    row = refused.cases[CASE]
    assert row["verdict"] == "error"    # one run is no baseline either: both are said
    assert "baseline not recorded: 1 run, fewer than the 10 a baseline is recorded from" \
        in row["message"]
    assert ("these runs fail the gate against the entry they would replace: peak memory (RSS "
            "of the worker process, its largest rank) ") in row["message"]
    assert row["baseline_refused"][-1].startswith("peak memory (RSS of the worker process")

    # Forced, the entry is recorded, and its lineage keeps what was accepted: nothing fails,
    # so no row has a repro command.
    updated = run_suite(*ARGS, *WIDE, "--perf-update-baselines=force", "--perf-runs",
                        "1", "--perf-explain", "never", "--junitxml",
                        str(tmp_path / "updated.xml"), baseline_file=baseline_file)
    assert updated.outcome.ret == 0, updated.output
    assert updated.cases[CASE]["verdict"] == "regression" and "repro" not in updated.cases[CASE]
    # Issue 65: its test passed, and its verdict property says it was recorded (the memory
    # keeps the verdict it was judged against the entry it replaced).
    testcase, properties = junit_case(tmp_path / "updated.xml")
    assert testcase.is_passed
    assert (properties["verdict"], properties["peak-memory_verdict"]) == (
        "regression, recorded", "regression")
    recorded = updated.baseline()["entries"][CASE]
    assert recorded["peak_memory_bytes"] > entry["peak_memory_bytes"] * (1 + GROWTH_SHARE * 0.8)
    item = recorded["lineage"][-1]
    assert item["peak_memory_bytes"] == entry["peak_memory_bytes"]
    assert len(item["accepted"]) == 1   # memory alone: the throughput passed
    assert item["accepted"][0].startswith("peak memory (RSS of the worker process")
    assert "accepted" not in recorded
    update_line = updated.cases[CASE]["baseline_update"]
    assert ", peak memory (RSS of the worker process, its largest rank) " in update_line
    assert "; accepted with --perf-update-baselines=force: peak memory" in update_line
    assert f"{CASE}: baseline recorded with --perf-update-baselines=force although these runs " \
        "fail the gate" in updated.output


@READS_TINY_RECORDING
def test_a_b_judges_the_same_memory_growth_the_gate_fails(tiny_recording, run_suite):
    """Issue 63: A/B passed a candidate whose peak memory the gate failed (+41%). The same real
    growth as the gate's test above, as the candidate stack's variable: A/B fails it on memory
    with the gate's tolerance and line, however its throughput compared, and names both."""
    entry = tiny_recording.baseline()["entries"][CASE]
    # One pair: a process's peak resident set is the same run to run within a few percent.
    ab = run_suite(*ARGS, "--perf-runs", "1", "--perf-set", "max-runs=1",
                   "--perf-candidate-env", f"RN50_FAULT={growth(entry['peak_memory_bytes'])}")
    assert ab.outcome.ret == 1, ab.output
    row = ab.cases[CASE]
    assert row["kind"] == "ab" and row["verdict"] == "regression"
    assert row["memory_delta"] > 0.3 and row["throughput_verdict"] != "regression"
    assert row["candidate"]["peak_memory_bytes"] > row["reference"]["peak_memory_bytes"]
    assert len(row["candidate"]["runs_peak_memory_bytes"]) == 1
    memory = r"[\d.]+ [MG]iB"
    assert re.match(rf"{CASE}: peak memory \(RSS of the worker process, its largest rank\) "
                    rf"{memory} -> {memory} \(\+\d+%, tolerance 10%\); throughput: candidate ",
                    row["message"]), row["message"]
    assert f"{CASE}: peak memory (RSS" in ab.output and "; repro: " in ab.output
    table_row = next(line for line in ab.output.splitlines() if line.startswith(f"{CASE}  "))
    assert re.search(r"regression \(memory \+\d+%\)$", table_row), table_row   # as the gate's


@READS_TINY_RECORDING
def test_another_machines_baseline_is_not_comparable_and_never_a_regression(tiny_recording,
                                                                            run_suite,
                                                                            tmp_path):
    """Issue 63: an entry recorded on a 16-CPU Xeon was judged on the 2-core EPYC, a regression
    46% below. Another device (or, on CPUs, another CPU count) ends the case not-comparable,
    saying what differs; a CI gate fails it with an exit status of its own."""
    document = tiny_recording.baseline()
    environment = document["entries"][CASE]["environment"]
    environment.update(device="Intel(R) Xeon(R) Platinum 8480+", cpu_count=16)
    baseline_file = tmp_path / "elsewhere.json"
    baseline_file.write_text(json.dumps(document))
    gate = run_suite(*ARGS, "--perf-runs", "1", "--perf-require-baseline",
                     baseline_file=baseline_file)
    assert gate.outcome.ret == 78, gate.output
    row = gate.cases[CASE]
    assert row["verdict"] == "not-comparable" and "delta" not in row
    assert row["other_machine"][0].startswith(
        "device Intel(R) Xeon(R) Platinum 8480+ (baseline) vs ")
    assert row["other_machine"][1].startswith("cpu_count 16 (baseline) vs ")
    assert f"the baseline for {CASE} in {baseline_file} was recorded on another machine " \
        "(device Intel(R) Xeon(R) Platinum 8480+ (baseline) vs " in row["message"]
    assert "1 case (1n1g_fp32_b2) not compared: the baseline is another machine's" in gate.output
    assert "exits 78, not 1" in gate.output
