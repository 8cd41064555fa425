"""`rn50-perf gpu-check --measure` and the MFU of tools/gpu/bench.py, on a host without a GPU: the
MFU arithmetic per compute dtype, the plan and its 20-minute budget, and the folder it writes, with
each step's command answered by a fake (a GPU cannot exist here); the refusal on this host is in
test_gpu_tools.py."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tools.gpu.bench import (PEAK_DTYPE, PEAK_PROBE, TRAINING_GFLOP_PER_IMAGE, baseline_options,
                             mfu, parse_peaks)
from tools.gpu.cuda_paths import FAILED, IMAGE, PASSED, SKIPPED, path_table, paths
from tools.gpu.hour import (BUDGET_S, CommandRun, Context, MeasureError, StepResult, estimates,
                            output_files, step_timeout)
from tools.gpu.measure import command_runner, measure, new_folder, run_plan, run_step
from tools.gpu.steps import plan
from tools.worker_runs import ratios

PEAKS = {"fp32": 50.0, "tf32": 400.0, "fp16": 750.0, "bf16": 800.0}
KEY = "nvidia-h100-80gb-hbm3"
SUITE_STEPS = {"baselines": ["1n1g_amp_b256", "1n1g_bf16_b256", "1n1g_fp32_b128",
                             "1n1g_tf32_b256"],
               "explain": ["1n1g_bf16_b256"], "max-batch": ["1n1g_amp_maxbatch"],
               "time-to-train": ["1n1g_fp32_b16_ttt"]}


@pytest.fixture(autouse=True)
def scratch_in_tmp_path(tmp_path, monkeypatch):
    """The scratch folder a measure creates lands under this test's tmp_path."""
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


# -- MFU per compute dtype (Task A) -----------------------------------------------------------

def test_each_precision_is_measured_against_the_peak_of_its_compute_dtype():
    assert PEAK_DTYPE == {"fp32": "fp32", "tf32": "tf32", "amp": "fp16", "bf16": "bf16"}
    model_tflops = 1000 * TRAINING_GFLOP_PER_IMAGE / 1e3   # 1000 img/s: 24.5 TFLOP/s
    assert mfu(1000, "fp32", PEAKS) == pytest.approx(model_tflops / 50)
    assert mfu(1000, "tf32", PEAKS) == pytest.approx(model_tflops / 400)
    assert mfu(1000, "amp", PEAKS) == pytest.approx(model_tflops / 750)
    assert mfu(1000, "bf16", PEAKS) == pytest.approx(model_tflops / 800)


def test_mfu_is_none_without_a_throughput_or_a_peak():
    assert mfu(None, "amp", PEAKS) is None
    assert mfu(0.0, "amp", PEAKS) is None
    assert mfu(1000, "amp", {"bf16": 800.0}) is None


def test_the_probe_output_gives_every_dtype_or_says_which_is_missing():
    assert parse_peaks("warming up\n" + json.dumps(PEAKS)) == PEAKS
    with pytest.raises(ValueError, match="measured no fp16, tf32"):
        parse_peaks(json.dumps({"fp32": 50.0, "bf16": 800.0}))


@pytest.mark.slow
def test_the_matmul_probe_runs_and_parses_on_this_cpu():
    done = subprocess.run([sys.executable, "-c", PEAK_PROBE, "cpu", "64", "0.01"],
                          capture_output=True, text=True, timeout=120, check=True)
    peaks = parse_peaks(done.stdout)
    assert set(peaks) == {"fp32", "tf32", "fp16", "bf16"} and min(peaks.values()) > 0


def test_the_harness_ratio_is_worker_over_bare():
    found = ratios([100.0, 110.0, 90.0], [99.0, 111.0, 88.2], names=("bare", "worker"))
    assert found["ratio_of_medians"] == pytest.approx(99.0 / 100.0)
    assert found["median_pair_ratio"] == pytest.approx(0.99)


def test_the_baseline_options_take_each_precisions_profile_batch_unless_batches_are_given():
    assert baseline_options(("fp32", "amp"), runs=3) == [
        "--perf-profile", "full", "-k", "1n1g", "--perf-precisions", "fp32,amp",
        "--perf-update-baselines=force", "--perf-runs", "3"]
    assert "--perf-update-baselines" in baseline_options(("fp32",), runs=10)
    assert baseline_options(("bf16",), (128, 256))[-2:] == ["--perf-batches", "128,256"]


# -- the plan and its budget ------------------------------------------------------------------

def test_the_plan_runs_every_step_the_first_gpu_hour_needs_in_order():
    assert [step.name for step in plan()] == [
        "environment", "peaks", "paths", "baselines", "mfu", "harness", "loader", "explain",
        "max-batch", "time-to-train"]


@pytest.mark.parametrize("devices", [1, 8])
def test_every_step_has_an_estimate_and_the_plan_is_longer_than_a_short_lease(devices):
    seconds = estimates(devices)
    assert BUDGET_S == 1200
    assert all(value > 0 for name, value in seconds.items() if name != "mfu")
    # Measured: the whole plan does not fit a 15-minute lease, hence --budget and --steps.
    assert sum(seconds.values()) > 15 * 60, seconds


def test_the_cost_model_reproduces_both_gpu_hours():
    """docs/gpu-hours/: on the H200 (2026-11-25) the paths step ran 15 paths (no DALI, one GPU)
    in 321 s, and the baselines step ran amp, bf16 and fp32 (3 runs and a profiled run each)
    and one tf32 run in 440 s before its limit; on the H100 (2026-11-26) a suite run of
    1n1g_amp_b256 took about 30 s and the first torch.compile 58 s; on the H100 (2026-11-27)
    the same 15 paths took 494 s. Each figure is the slower host's, so each step's estimate is
    at or above what it took on either, and within 10% of the slower."""
    from perf_tests.core.cases import FULL, PROFILED_ITERATIONS
    from tools.gpu.cuda_paths import PATH_ITERS, PATH_WARMUP
    from tools.gpu.hour import COMPILE_S, PROFILE_EXTRA_S, SESSION_S, run_s, suite_run_s
    ran = [path for path in paths(1) if path.devices == 1 and path.needs not in ("dali", IMAGE)]
    assert len(ran) == 15
    paths_model = sum(run_s(path.changes.get("precision", "amp"), 64, PATH_WARMUP + PATH_ITERS)
                      for path in ran) + COMPILE_S
    full = FULL.warmup_iters + FULL.timed_iters
    baselines_model = SESSION_S + suite_run_s("tf32", 256, full) + sum(
        3 * suite_run_s(precision, batch, full) + PROFILE_EXTRA_S
        + suite_run_s(precision, batch, FULL.warmup_iters + PROFILED_ITERATIONS)
        for precision, batch in (("amp", 256), ("bf16", 256), ("fp32", 128)))
    assert paths_model == pytest.approx(494, rel=0.1) and paths_model >= 321
    assert baselines_model == pytest.approx(440, rel=0.1)
    assert suite_run_s("amp", 256, full) == pytest.approx(30, rel=0.1)
    assert COMPILE_S == pytest.approx(58, rel=0.1)


HOURS = Path(__file__).resolve().parent.parent / "docs" / "gpu-hours"
# A row of the steps table that `gpu_check --measure` prints and writes into summary.md.
STEP_ROW = re.compile(r"^\| ([a-z-]+) \| (pass|FAIL|skipped) \| (\d+) \| \d+ \| (.*) \|$",
                      re.MULTILINE)


def hour_steps() -> list[tuple[str, str, str, int, str]]:
    """(hour, step, outcome, seconds, note) of every steps table in docs/gpu-hours/."""
    return [(path.parent.name, step, outcome, int(seconds), note)
            for path in sorted(HOURS.glob("*/*")) if path.suffix in (".log", ".md", ".txt")
            for step, outcome, seconds, note in STEP_ROW.findall(path.read_text())]


def test_no_step_of_a_gpu_hour_took_longer_than_its_estimate():
    """Each step's estimate against what it took in every GPU hour that ran `--measure` (the
    table in docs/gpu.md): a step that finished took no longer, and one stopped at its limit
    needed more than it got, so its estimate is above that. The environment step, estimated at
    5 s, took 8 s on the H200 and 13.8 s on the H100 and was stopped at 5 s on 2026-11-28."""
    seconds = estimates()
    rows = hour_steps()
    assert {row[0] for row in rows} == {"2026-11-25-nvidia-h200", "2026-11-27-nvidia-h100",
                                        "2026-11-28-nvidia-h200"}
    finished = [(hour, step, took) for hour, step, outcome, took, _ in rows if outcome == PASSED]
    stopped = [(hour, step, took) for hour, step, outcome, took, note in rows
               if outcome == FAILED and note.startswith("stopped after ")]
    assert {step for _, step, _ in finished} == {"environment", "peaks", "paths", "mfu",
                                                 "explain", "max-batch", "time-to-train"}
    assert {step for _, step, _ in stopped} == {"environment", "paths", "baselines"}
    assert [row for row in finished if row[2] > seconds[row[1]]] == []
    assert [row for row in stopped if row[2] >= seconds[row[1]]] == []


@pytest.mark.parametrize("budget, took", [
    # 2026-11-28, H200: --budget 265 --steps environment,max-batch,time-to-train; its
    # environment step was stopped at its 5 s estimate: 13.8 s is what it took on the H100.
    (265, {"environment": 13.8, "max-batch": 79, "time-to-train": 33}),
    # 2026-11-27, H100: --budget 480 --steps environment,peaks,paths,explain; the paths step
    # was stopped at 374 s after 10 paths, and the other 9 took 120 s in a second call.
    (480, {"environment": 13.8, "peaks": 9.8, "paths": 494, "explain": 72})])
def test_a_gpu_hours_call_again_stops_no_step_at_a_short_estimate(budget, took, tmp_path):
    """The calls of the GPU hours replayed with what each step took there: every step gets at
    least that, or (the budget shorter than the plan) the budget runs out before its estimate
    does, and the step is stopped for the budget, as the plan's first line warns."""
    context = Context(tmp_path / "gpu-hour", tmp_path / "scratch", budget_s=budget)
    context.out.mkdir()
    now, given = [0.0], {}

    def run(name, command, timeout):
        given[name] = timeout
        now[0] += min(took[name], timeout)
        return CommandRun(0, "", "", timed_out=took[name] > timeout)

    steps = plan(only=list(took))
    run_plan(steps, context, run, clock=lambda: now[0])
    estimate = {step.name: step.estimate_s for step in steps}
    short = [name for name in given if given[name] < took[name]]
    assert [name for name in short if given[name] >= estimate[name]] == []
    assert short == ([] if budget == 265 else ["paths"])
    assert given.keys() == ({"environment", "max-batch", "time-to-train"} if budget == 265
                            else {"environment", "peaks", "paths"})


def test_five_baseline_runs_would_not_fit_hence_three():
    assert estimates(baseline_runs=5)["baselines"] > BUDGET_S / 2


def test_the_baselines_are_the_full_protocol_at_the_profile_batches():
    step = next(step for step in plan() if step.name == "baselines")
    context = Context(Path("/gpu-hour"), Path("/scratch"))
    context.results["environment"] = step_result({"hardware": KEY})
    command = step.command(context)
    for option, value in (("--perf-profile", "full"), ("-k", "1n1g"), ("--perf-runs", "3"),
                          ("--perf-precisions", "fp32,tf32,amp,bf16"),
                          ("--perf-baseline-file", f"/gpu-hour/{KEY}.json"),
                          ("--perf-results", "/scratch/baselines")):
        assert command[command.index(option) + 1] == value
    assert "--perf-update-baselines=force" in command   # 3 runs: fewer than a baseline's 10
    assert not {"--perf-set", "--perf-batches"} & set(command)


def test_a_step_gets_what_the_later_steps_leave_and_is_skipped_below_half_its_estimate():
    assert step_timeout(left_s=1200, estimate_s=300, later_s=700) == 500
    # The later steps do not fit: this one still gets its own estimate, as the earlier matters
    # more; where less than that is left, what is left, down to half the estimate.
    assert step_timeout(left_s=800, estimate_s=300, later_s=700) == 300
    assert step_timeout(left_s=200, estimate_s=300, later_s=700) == 200
    assert step_timeout(left_s=149, estimate_s=300, later_s=0) is None


# -- the folder it writes, every command answered by a fake -----------------------------------

def step_result(data):
    return StepResult(PASSED, "", data)


def option(command, flag):
    return Path(command[command.index(flag) + 1])


def suite_results(command, cases):
    folder = option(command, "--perf-results")
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps({"schema_version": 1, "cases": cases}))


def fake_baselines(command):
    cases = {f"1n1g_{precision}_b{batch}": {
        "precision": precision, "batch_per_device": batch, "median_ips": ips, "verdict":
        "no-baseline", "message": f"1n1g_{precision}_b{batch}: {ips} img/s, no baseline"}
        for precision, batch, ips in (("fp32", 128, 800.0), ("tf32", 256, 1500.0),
                                      ("amp", 256, 3100.0), ("bf16", 256, 3000.0))}
    suite_results(command, cases)
    option(command, "--perf-baseline-file").write_text(json.dumps({
        "schema_version": 1, "hardware": KEY,
        "entries": {case_id: {"median_ips": row["median_ips"]} for case_id, row in cases.items()}}))
    return CommandRun(0, "4 passed", "")


def fake_step(name, command):
    """What each step's command leaves on a GPU host; the harness fails, the loader hangs, the
    max-batch search skips and the time-to-train cannot even start."""
    if name == "environment":
        return CommandRun(0, json.dumps({"device": "NVIDIA H100 80GB HBM3", "hardware": KEY,
                                         "torch": "2.11.0", "driver": "580.159"}), "")
    if name == "peaks":
        return CommandRun(0, json.dumps(PEAKS), "")
    if name == "paths":
        option(command, "--output").write_text(json.dumps([
            {"path": "amp", "outcome": PASSED, "ips": 2900.0, "note": "loss 7.1 -> 6.9",
             "record": {"outcome": "ok"}},
            {"path": "dali-gpu", "outcome": SKIPPED, "ips": None, "note": "no DALI"}]))
        return CommandRun(0, "2 of 2 paths passed or skipped", "")
    if name == "baselines":
        return fake_baselines(command)
    if name == "harness":
        return CommandRun(1, "", "Traceback (most recent call last):\nCalledProcessError: "
                                 "torchrun returned non-zero exit status 1.")
    if name == "loader":
        return CommandRun(-9, "", "", timed_out=True)
    if name == "explain":
        suite_results(command, {"1n1g_bf16_b256": {
            "verdict": "pass", "message": "1n1g_bf16_b256: 2990 img/s, -0.3%",
            "explain": {"lines": ["aten::convolution_backward 41.0 -> 41.2 ms"]}}})
        return CommandRun(0, "1 passed", "")
    if name == "max-batch":
        suite_results(command, {"1n1g_amp_maxbatch": {
            "verdict": "skipped", "message": "1n1g_amp_maxbatch: skipped: device busy"}})
        return CommandRun(0, "1 skipped", "")
    raise OSError(f"cannot start {command[0]}")


def fake_runner(scratch, log):
    return lambda name, command, timeout: fake_step(name, command)


def test_each_step_is_recorded_with_its_reason_and_the_rest_go_on(tmp_path, capsys):
    out = tmp_path / "gpu-hour"
    assert measure(out, 1, fake_runner) == 1
    document = json.loads((out / "measure.json").read_text())
    steps = {step["step"]: step for step in document["steps"]}
    assert {name: step["outcome"] for name, step in steps.items()} == {
        "environment": PASSED, "peaks": PASSED, "paths": PASSED, "baselines": PASSED,
        "mfu": PASSED, "harness": FAILED, "loader": FAILED, "explain": PASSED,
        "max-batch": SKIPPED, "time-to-train": FAILED}
    assert steps["harness"]["note"] == ("CalledProcessError: torchrun returned non-zero exit "
                                        "status 1.")
    assert steps["loader"]["note"].startswith("stopped after ")
    assert steps["max-batch"]["note"] == "1n1g_amp_maxbatch: skipped: device busy"
    assert steps["time-to-train"]["note"] == f"OSError: cannot start {sys.executable}"
    assert steps["paths"]["note"] == "1 passed, 1 skipped"
    assert "record" not in steps["paths"]["data"]["rows"][0]
    printed = capsys.readouterr().out
    assert "| time-to-train | FAIL |" in printed and "failed: harness, loader, time-to-train" \
        in printed


def test_mfu_reads_the_baseline_cases_against_their_own_peaks(tmp_path):
    out = tmp_path / "gpu-hour"
    measure(out, 1, fake_runner)
    document = json.loads((out / "measure.json").read_text())
    figures = next(step for step in document["steps"] if step["step"] == "mfu")["data"]["cases"]
    assert figures["1n1g_amp_b256"]["peak_dtype"] == "fp16"
    assert figures["1n1g_amp_b256"]["mfu"] == pytest.approx(
        3100 * TRAINING_GFLOP_PER_IMAGE / 1e3 / 750)
    assert figures["1n1g_fp32_b128"]["mfu"] == pytest.approx(
        800 * TRAINING_GFLOP_PER_IMAGE / 1e3 / 50)


def test_the_folder_holds_the_planned_files_and_no_more_than_eight(tmp_path):
    out = tmp_path / "gpu-hour"
    measure(out, 1, fake_runner)
    assert sorted(path.name for path in out.iterdir()) == sorted(output_files(KEY))
    assert len(output_files(KEY)) <= 8
    summary = (out / "summary.md").read_text()
    assert summary.startswith(f"# First GPU hour: NVIDIA H100 80GB HBM3 ({KEY})")
    for text in ("| step | outcome | seconds | planned | note |", "| amp | pass | 2900 |",
                 "| 1n1g_amp_b256 | 3100 | fp16 | 750 | ",
                 "    aten::convolution_backward 41.0 -> 41.2 ms",
                 f"`cp gpu-hour/{KEY}.json baselines/`"):
        assert text in summary, text
    assert json.loads((out / f"{KEY}.json").read_text())["hardware"] == KEY
    assert json.loads((out / "baseline-results.json").read_text())["cases"]


def test_without_the_environment_the_baselines_and_mfu_skip_and_the_folder_stays_small(
        tmp_path):
    out = tmp_path / "gpu-hour"
    failing = lambda scratch, log: lambda name, command, timeout: CommandRun(  # noqa: E731
        1, "", "RuntimeError: CUDA error: no kernel image is available")
    assert measure(out, 1, failing) == 1
    document = json.loads((out / "measure.json").read_text())
    outcomes = {step["step"]: (step["outcome"], step["note"]) for step in document["steps"]}
    assert outcomes["baselines"] == (SKIPPED, "no hardware key: the environment step did not "
                                              "pass")
    assert outcomes["mfu"] == (SKIPPED, "no matmul peaks: the peaks step did not pass")
    assert outcomes["paths"] == (FAILED, "RuntimeError: CUDA error: no kernel image is "
                                         "available")
    assert sorted(path.name for path in out.iterdir()) == ["measure.json", "measure.log",
                                                           "summary.md"]
    assert "No baseline file was recorded" in (out / "summary.md").read_text()


def test_steps_past_the_budget_are_skipped_with_the_reason(tmp_path):
    context = Context(tmp_path / "gpu-hour", tmp_path / "scratch")
    context.out.mkdir()
    # Seconds since the start as each step begins: the baselines take 925 s, not 563.
    ticks = iter([0, 0, 0, 5, 250, 1175, 1175, 1175, 1175, 1175, 1175])
    results = run_plan(plan(), context, fake_runner(None, None), clock=lambda: next(ticks))
    outcomes = {result.name: result.outcome for result in results}
    assert [name for name, outcome in outcomes.items() if outcome == SKIPPED] == [
        "harness", "loader", "explain", "max-batch", "time-to-train"]
    assert outcomes["mfu"] == PASSED  # costs nothing: never skipped for time
    assert all(result.note.startswith("no time left: under half of the about ")
               for result in results if result.outcome == SKIPPED)


def test_a_short_budget_runs_the_first_steps_and_skips_the_last(tmp_path):
    """The first GPU hour's first call: --budget 560 with the environment, the peaks, the
    baselines, the MFU and the paths; the old rule kept time for the paths and the baselines
    and skipped the environment and the peaks, and with them the baselines and the MFU."""
    context = Context(tmp_path / "gpu-hour", tmp_path / "scratch", budget_s=560)
    context.out.mkdir()
    steps = plan(only=["environment", "peaks", "baselines", "mfu", "paths"])
    ticks = iter([0, 0, 8, 16, 460, 460])  # the baselines take 444 s
    results = run_plan(steps, context, fake_runner(None, None), clock=lambda: next(ticks))
    assert [(result.name, result.outcome) for result in results] == [
        ("environment", PASSED), ("peaks", PASSED), ("baselines", PASSED), ("mfu", PASSED),
        ("paths", SKIPPED)]
    assert results[-1].note == ("no time left: under half of the about 639 s it needs remains "
                                "in the budget")


def test_steps_run_in_the_order_given_and_an_unknown_one_is_named(tmp_path):
    assert [step.name for step in plan(only=["baselines", "environment", "baselines"])] == [
        "baselines", "environment"]
    with pytest.raises(MeasureError, match=r"^--steps names no step paht; the steps are "
                                           r"environment, peaks, paths, "):
        plan(only=["environment", "paht"])


def test_the_budget_and_the_steps_reach_the_folder(tmp_path, capsys):
    out = tmp_path / "gpu-hour"
    measure(out, 1, fake_runner, budget_s=300, only=["environment", "peaks"])
    document = json.loads((out / "measure.json").read_text())
    assert document["budget_s"] == 300
    assert [step["step"] for step in document["plan"]] == ["environment", "peaks"]
    assert capsys.readouterr().out.startswith(
        "2 steps, about 0.7 minutes planned against a 5.0-minute budget; into ")


def test_a_recording_session_says_what_it_recorded_and_where_it_stopped(tmp_path):
    from tools.gpu.steps import suite_result
    (tmp_path / "results.json").write_text(json.dumps({
        "cases": {"1n1g_amp_b256": {
            "verdict": "no-baseline", "median_ips": 6115.437,
            "baseline_update": "none -> 6115.4 img/s",
            "message": "1n1g_amp_b256: 6115.4 img/s; no baseline entry for 1n1g_amp_b256 in "
                       "x.json; record one with --perf-update-baselines"}},
        "interrupted": {"at": "2026-11-25T23:53:35Z", "in_case": "1n1g_tf32_b256",
                        "not_run": []}}))
    found = suite_result(CommandRun(2, "", "", timed_out=True), tmp_path)
    assert found.note == ("1n1g_amp_b256: 6115.4 img/s, baseline recorded (none -> 6115.4 "
                          "img/s); interrupted in 1n1g_tf32_b256")


def test_measure_takes_a_new_or_empty_folder_only(tmp_path):
    new_folder(tmp_path / "new" / "gpu-hour")
    new_folder(tmp_path / "new" / "gpu-hour")  # empty: fine
    (tmp_path / "new" / "gpu-hour" / "summary.md").write_text("earlier")
    with pytest.raises(MeasureError, match="already exists and is not an empty folder"):
        new_folder(tmp_path / "new" / "gpu-hour")


def test_the_path_table_is_markdown():
    assert path_table([{"path": "amp", "outcome": PASSED, "ips": 2900.4, "note": "loss ok"},
                       {"path": "dali-gpu", "outcome": SKIPPED, "ips": None, "note": "no"}]) == [
        "| path | outcome | img/s | note |", "|---|---|---:|---|",
        "| amp | pass | 2900 | loss ok |", "| dali-gpu | skipped | - | no |"]



# -- the real commands on this CPU host ------------------------------------------------------

def context_with_key(tmp_path, key="cpu-test"):
    context = Context(tmp_path / "gpu-hour", tmp_path / "scratch")
    context.out.mkdir()
    context.scratch.mkdir()
    context.results["environment"] = step_result({"hardware": key})
    return context


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SUITE_STEPS))
def test_each_suite_step_selects_its_cases_in_the_real_suite(name, tmp_path):
    step = next(step for step in plan() if step.name == name)
    done = subprocess.run(step.command(context_with_key(tmp_path)) + ["--collect-only", "-q"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    collected = sorted(line.split("[")[1].rstrip("]") for line in done.stdout.splitlines()
                       if "::test_" in line)
    assert collected == SUITE_STEPS[name]


@pytest.mark.slow
def test_the_real_runner_records_a_step_the_host_cannot_hold_as_skipped(tmp_path):
    context = Context(tmp_path / "gpu-hour", tmp_path / "scratch")
    context.out.mkdir()
    context.scratch.mkdir()
    steps = {step.name: step for step in plan()}
    with (context.out / "measure.log").open("a") as log:
        run = command_runner(context.scratch, log)
        context.results["environment"] = run_step(steps["environment"], context, 120, run)
        explain = run_step(steps["explain"], context, 300, run)
    assert context.results["environment"].outcome == PASSED
    assert context.hardware.startswith("cpu-")
    assert (explain.outcome, explain.note) == (SKIPPED, (
        "1n1g_bf16_b256: skipped: the full profile measures CUDA devices and this host has "
        "none; use --perf-profile smoke"))
    log_text = (context.out / "measure.log").read_text()
    assert "===== environment: " in log_text and "===== explain: " in log_text


@pytest.mark.idle_wait
def test_a_command_past_its_limit_is_stopped_and_logged(tmp_path):
    import io
    log = io.StringIO()
    run = command_runner(tmp_path, log)
    ran = run("hang", [sys.executable, "-c", "import time; print('started', flush=True); "
                                             "time.sleep(600)"], 3)
    assert ran.timed_out and ran.returncode != 0 and ran.stdout == "started\n"
    assert "===== hang: " in log.getvalue() and "stopped at its time limit" in log.getvalue()


def test_the_loader_step_reads_gpu_bench_and_gives_the_loaders_share(tmp_path):
    from tools.gpu.steps import read_loader
    context = Context(tmp_path, tmp_path)
    (tmp_path / "loader.json").write_text(json.dumps({"input": {
        "synthetic": {"median_ips": 3000.0, "outcome": "ok", "message": ""},
        "torch": {"median_ips": 1500.0, "outcome": "ok", "message": "",
                  "settings": {"data_workers": 16}}}}))
    found = read_loader(context, CommandRun(0, "", ""))
    assert (found.outcome, found.note) == (PASSED, "torch loader 1500 img/s = 50% of synthetic "
                                                   "3000 img/s (bf16 b256, 16 workers)")


def test_a_failed_path_fails_the_paths_step_and_names_it(tmp_path):
    from tools.gpu.steps import read_paths
    context = Context(tmp_path / "out", tmp_path)
    context.out.mkdir()
    (tmp_path / "paths.json").write_text(json.dumps([
        {"path": "amp", "outcome": FAILED, "ips": None, "note": "error: CUDA error"},
        {"path": "bf16", "outcome": PASSED, "ips": 3000.0, "note": "loss 7.1 -> 6.9"}]))
    found = read_paths(context, CommandRun(1, "", ""))
    assert (found.outcome, found.note) == (FAILED, "1 passed, 0 skipped, failed: amp")
    assert (context.out / "paths.json").exists()


def test_the_path_check_writes_its_rows_as_it_goes(tmp_path):
    from tools.gpu.cuda_paths import Host, check_paths
    output = tmp_path / "paths.json"
    rows = check_paths(paths(devices=1)[:2], Host(0, {}), {}, 10, output)
    assert json.loads(output.read_text()) == rows
    assert [row["note"] for row in rows] == ["needs 1 CUDA devices, found 0"] * 2
