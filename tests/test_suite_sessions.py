"""Real `pytest perf_tests` sessions on this CPU: verdicts forced by baselines the tests write,
baseline updates, skip reasons and options. (The simulated multi-node launcher's scaling:
tests/test_interconnect_sessions.py; a session under pytest-xdist: tests/test_exports.py.)"""
import json
import shutil
from datetime import datetime, timedelta, timezone

import pytest

from conftest import KEPT_ENTRIES, READS_TINY_RECORDING, TINY_CASE_ARGS, baseline_document
from perf_tests.core.text import ips
from perf_tests.runs.phases import NAMES as PHASE_NAMES

pytestmark = pytest.mark.slow

ONE_RUN = ["--perf-runs", "1", "--perf-set", "max-runs=1"]


def entry(median_ips, **extra):
    return {"median_ips": median_ips, **extra}


YESTERDAY = (datetime.now(timezone.utc) - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
EVERY_VERDICT_BASELINE = baseline_document({
    # A band of 0.9 to 59 img/s: any plausible tiny CPU run passes; but a refresh replaced an
    # entry of 1e6 img/s yesterday: a drift the pass names (perf_tests/baselines/lineage.py).
    "1n1g_fp32_b2": entry(30.0, tolerance=0.97, lineage=[
        {"median_ips": 1e6, "recorded_at": YESTERDAY, "changed": "torch 2.11.0 -> 2.13.0"}]),
    # Its band auto, from three equal runs: the smoke profile's floor.
    "1n1g_fp32_b3": entry(1e6, runs_ips=[1e6, 1e6, 1e6], tolerance="auto",
                          environment={"torch": "1.0.0", "driver": "535.104"}),
    "1n1g_fp32_b4": entry(0.001),
    "1n1g_fp32_b5": entry(20.0, settings={"image_size": 224, "data_backend": "dali-cpu"}),
    "1n8g_amp_b256": entry(5000.0),
})
B3_STACK = {"torch": "1.0.0", "driver": "535.104"}


def earlier_session(started_at: str, runs: list[float], environment: dict = B3_STACK,
                    **row) -> str:
    """An earlier session's results.json, of 1n1g_fp32_b3 alone."""
    return json.dumps({"started_at": started_at, "environment": environment, "cases": {
        "1n1g_fp32_b3": {"runs_ips": runs, "settings": {"threads": 1}, **row}}})


# What the band of 1n1g_fp32_b3 learns from: five sessions on its stack, one of them slowed by
# 10% (it must not widen the band); a session on another torch, an A/B case, a file that is no
# session, and a session whose runs the host marked, all left out.
EARLIER_SESSIONS = {
    **{f"s{day}/results.json": earlier_session(f"2026-11-0{day}T10:00:00Z", [value])
       for day, value in enumerate([1e6 * 1.001, 0.999e6, 1e6, 1e6, 0.9e6], 1)},
    "other-torch/results.json": earlier_session("2026-11-06T10:00:00Z", [0.5e6],
                                                {**B3_STACK, "torch": "2.0.0"}),
    "ab/results.json": earlier_session("2026-11-07T10:00:00Z", [0.5e6], kind="ab"),
    "marked/results.json": earlier_session("2026-11-08T10:00:00Z", [0.5e6],
                                           marked_runs={"1": "busy"}),
    "broken/results.json": "{ not a session",
}
# The tests that read the session below: one worker runs them (make test's --dist loadgroup).
READS_EVERY_VERDICT = pytest.mark.xdist_group("suite-sessions-every-verdict")


@pytest.fixture(scope="module")
def every_verdict(shared_suite):
    """A session in which each verdict a measured case can have happens once, forced by the
    written baseline, with --perf-explain never."""
    return shared_suite("-k", "1n1g", "--perf-batches", "2,3,4,5,6", *TINY_CASE_ARGS,
                        *ONE_RUN, "--perf-explain", "never", baseline=EVERY_VERDICT_BASELINE,
                        earlier=EARLIER_SESSIONS)


@READS_EVERY_VERDICT
def test_every_measured_verdict_from_written_baselines(every_verdict):
    run = every_verdict
    assert run.outcome.ret == 1, run.output
    verdicts = {case_id: row["verdict"] for case_id, row in run.cases.items()}
    assert verdicts == {"1n1g_fp32_b2": "pass", "1n1g_fp32_b3": "regression",
                        "1n1g_fp32_b4": "improvement", "1n1g_fp32_b5": "no-baseline",
                        "1n1g_fp32_b6": "no-baseline"}
    run.outcome.assert_outcomes(passed=4, failed=1, warnings=4)

    # The regression is one line: case, median vs baseline, delta, tolerance and where it came
    # from, environment diff.
    failure = [line for line in run.outcome.outlines if "1n1g_fp32_b3:" in line and "below" in line]
    assert failure, run.output
    # Its band: the floor its five earlier sessions allow (the second slowest and the second
    # fastest 0.1% apart; the slowed one aside), a tenth of the smoke profile's 5%.
    reason = ("auto: its floor, twice how far the host moved (0.10%: 5 earlier sessions on "
              "this stack, the baseline's runs); the baseline's 3 runs scatter 0.00%")
    assert f"below the baseline 1000000.0 img/s (tolerance 0.5% ({reason}), 1 run, " \
        in failure[0]
    assert run.cases["1n1g_fp32_b3"]["tolerance_reason"] == reason
    assert f"1n1g_fp32_b3 judged with tolerance 0.5% ({reason})" in run.outcome.outlines
    assert "environment: driver 535.104 -> none, torch 1.0.0 -> " in failure[0]
    assert str(run.baseline_file) in failure[0]
    run.outcome.stdout.fnmatch_lines(["FAILED*test_training_throughput[[]1n1g_fp32_b3[]]*"])

    assert "not comparable" in run.cases["1n1g_fp32_b5"]["message"]
    assert "image_size 224 (baseline) vs 32" in run.cases["1n1g_fp32_b5"]["message"]
    assert "no baseline entry for 1n1g_fp32_b6" in run.cases["1n1g_fp32_b6"]["message"]

    row = run.cases["1n1g_fp32_b2"]
    assert {"nodes": 1, "gpus_per_node": 1, "batch_per_device": 2, "precision": "fp32",
            "image_size": 32, "data_backend": "synthetic", "baseline_ips": 30.0,
            "verdict": "pass", "speedup": 1.0}.items() <= row.items()
    assert len(row["runs_ips"]) == 1 and row["median_ips"] == row["runs_ips"][0]
    assert row["delta"] == pytest.approx(row["median_ips"] / 30.0 - 1)
    assert run.results["schema_version"] == 1 and run.results["profile"] == "smoke"
    assert run.results["environment"]["torch"]

    # Each run's raw record is in the folder, and the end-of-session table was printed.
    record = json.loads((run.results_dir / "1n1g_fp32_b2" / "run-1.json").read_text())
    assert record["outcome"] == "ok" and record["record"]["global_ips"] == row["runs_ips"][0]
    # The session's start is when it started, not when its first case was written (the first
    # run began before then: its end less its launch, within the second both are rounded to).
    started = datetime.strptime(run.results["started_at"], "%Y-%m-%dT%H:%M:%SZ")
    first_run_began = datetime.strptime(record["finished_at"], "%Y-%m-%dT%H:%M:%SZ") \
        - timedelta(seconds=record["launch_seconds"])
    assert started <= first_run_began + timedelta(seconds=1), (started, record)
    run.outcome.stdout.fnmatch_lines(["*ResNet50 training throughput*",
                                      "case*runs*img/s*spread*speedup*eff.*baseline*delta*"
                                      "detects*verdict*",
                                      "1n1g_fp32_b2 * 1 *pass"])
    # What each verdict could have seen: b3's one run against three equal ones saw no spread,
    # so just past its band (0.5%); b2's and b4's one run against an entry without runs show no
    # spread to judge by: no figure, and no warning of one.
    assert run.cases["1n1g_fp32_b3"]["min_detectable_slowdown"] == pytest.approx(0.0055,
                                                                                  abs=0.001)
    assert "min_detectable_slowdown" not in run.cases["1n1g_fp32_b2"]
    assert "min_detectable_slowdown" not in run.cases["1n1g_fp32_b4"]
    assert "min_detectable_slowdown" not in run.cases["1n1g_fp32_b5"]
    run.outcome.stdout.fnmatch_lines(["1n1g_fp32_b3 * 1%  regression"])
    # The pass within its band, 100% below the entry a refresh replaced yesterday, warns.
    assert run.cases["1n1g_fp32_b2"]["drift"]["refreshes"] == 1
    run.outcome.stdout.fnmatch_lines([f"  PerfWarning: 1n1g_fp32_b2: * img/s, * against the "
                                      "baseline 30.0 img/s (tolerance 97%); but -100.0% since "
                                      f"{YESTERDAY[:10]} across 1 refresh: torch 2.11.0 -> "
                                      "2.13.0; *"])
    # The file was only read: a session without --perf-update-baselines never writes it.
    assert run.baseline() == EVERY_VERDICT_BASELINE

    # A warning is its text and where the case's runs are, not the line of code that warned.
    run.outcome.stdout.fnmatch_lines(["  PerfWarning: 1n1g_fp32_b4: * above the baseline * "
                                      f"(runs in {run.results_dir}/1n1g_fp32_b4)"])
    assert ":0:" not in run.output
    assert "warn(" not in run.output
    assert list(run.results_dir.rglob("*.lock")) == []


@READS_EVERY_VERDICT
def test_explain_never_profiles_not_even_a_regression(every_verdict):
    """--perf-explain never: the regression gets no operator profile (its default, auto,
    profiles one, and --perf-update-baselines stores one: tests/test_explain_sessions.py)."""
    run = every_verdict
    assert run.outcome.ret == 1 and run.cases["1n1g_fp32_b3"]["verdict"] == "regression"
    assert "operator profile" not in run.output and "profiling operators" not in run.output
    assert not (run.results_dir / "1n1g_fp32_b3" / "profile").exists()
    assert "explain" not in run.cases["1n1g_fp32_b3"]


@READS_TINY_RECORDING
def test_plots_off_writes_every_file_but_the_figures(tiny_recording):
    """The tests' sessions run with --perf-set plots=off (tests/conftest.py): results.json,
    report.md and the run records as ever, no PNG, and the results line names what was
    written. (The sessions that read figures draw them: A/B, max batch, time to train, and
    the session whose every case skipped, which draws none.)"""
    folder = tiny_recording.results_dir
    assert (folder / "results.json").is_file() and (folder / "report.md").is_file()
    assert (folder / "1n1g_fp32_b2" / "run-1.json").is_file()
    assert list(folder.glob("*.png")) == []
    (line,) = [line for line in tiny_recording.outcome.outlines if line.startswith("results: ")]
    assert line == f"results: {folder / 'results.json'}, {folder / 'report.md'}", line


@READS_TINY_RECORDING
def test_update_baselines_round_trip_keeps_every_other_entry(tiny_recording, run_suite,
                                                             tmp_path, kept_fork_servers):
    first = tiny_recording
    assert first.outcome.ret == 0, first.output
    stored = first.baseline()
    assert stored["entries"]["1n8g_amp_b256"] == KEPT_ENTRIES["1n8g_amp_b256"]
    new = stored["entries"]["1n1g_fp32_b2"]
    assert new["median_ips"] == pytest.approx(first.cases["1n1g_fp32_b2"]["median_ips"], rel=1e-3)
    assert len(new["runs_ips"]) == 2 and new["source"] == "measured"
    assert datetime.strptime(new["recorded_at"], "%Y-%m-%dT%H:%M:%SZ")
    assert new["environment"]["torch"] and new["settings"]["image_size"] == 32
    assert new["tolerance"] == "auto" and new["cv"] >= 0   # a band from the noise, each gate
    first.outcome.stdout.fnmatch_lines(["*baseline updated none -> *"])
    # ... and the table says the entry was recorded, beside the verdict against the one before.
    first.outcome.stdout.fnmatch_lines(["1n1g_fp32_b2 * no-baseline, recorded"])
    # A line as each run ends, and no lock file left beside the baseline or in the results.
    first.outcome.stdout.fnmatch_lines([f"1n1g_fp32_b2 run {number}/2: * img/s*"
                                        for number in (1, 2)])
    assert list(first.cwd.rglob("*.lock")) == []
    # Each run's wall time, phase by phase (perf_tests/runs/phases.py): every phase there, and
    # together the whole; the case's row and report.md carry the median split.
    for number in (1, 2):
        run = json.loads((first.results_dir / "1n1g_fp32_b2" / f"run-{number}.json").read_text())
        phases = run["phases"]
        assert list(phases) == ["wall", *PHASE_NAMES] and "marks" not in run["record"]
        assert sum(phases[name] for name in PHASE_NAMES) == pytest.approx(phases["wall"], abs=0.02)
        assert phases["window"] == pytest.approx(run["record"]["elapsed_s"], abs=0.01)
        # Forked by the session's fork server, which the probe started: no run imports torch.
        assert run["record"]["worker_start"] == "forked"
    assert first.cases["1n1g_fp32_b2"]["run_phases"]["wall"] > 0
    assert "| 1n1g_fp32_b2 |" in (first.results_dir / "report.md").read_text().split(
        "### Where a run's time went")[1]

    baseline_file = tmp_path / "cpu.json"   # a copy: the recording's other readers read it
    shutil.copy(first.baseline_file, baseline_file)
    second = run_suite("-k", "1n1g", "--perf-batches", "2", *TINY_CASE_ARGS, *ONE_RUN,
                       "--perf-require-baseline", "--perf-tolerance", "0.9",
                       baseline_file=baseline_file)
    assert second.outcome.ret == 0, second.output
    row = second.cases["1n1g_fp32_b2"]
    # The stored entry was found and judged against (no-baseline would fail under
    # --perf-require-baseline). One tiny run beside another xdist worker can land above the 90%
    # band, so improvement is as good an answer here as pass.
    assert row["verdict"] in ("pass", "improvement"), row["message"]
    assert row["baseline_ips"] == new["median_ips"]
    assert f"the baseline {ips(new['median_ips'])} img/s" in row["message"]
    assert second.baseline() == stored
    # The same gate again, in another folder with another device lock: forked by the server
    # the session before it used, none started (conftest.kept_fork_servers: the tests' sessions
    # share one server a stack; one that has forked nothing for a while ends, so the session
    # before is this test's own).
    servers = server_pids(kept_fork_servers.path)
    third = run_suite("-k", "1n1g", "--perf-batches", "2", *TINY_CASE_ARGS, *ONE_RUN,
                      "--perf-require-baseline", "--perf-tolerance", "0.9",
                      baseline_file=baseline_file)
    assert third.outcome.ret == 0 and third.baseline() == stored, third.output
    assert json.loads((third.results_dir / "1n1g_fp32_b2" / "run-1.json").read_text())[
        "record"]["worker_start"] == "forked"
    started = {name: pid for name, pid in server_pids(kept_fork_servers.path).items()
               if servers.get(name) != pid}
    assert servers and not started, started


def server_pids(folder) -> dict[str, str]:
    """Each running server of a fork-server folder by its key: its pid file's text (one that
    ends as it is read is left out)."""
    pids = {}
    for path in folder.glob("*.pid"):
        try:
            pids[path.stem] = path.read_text()
        except FileNotFoundError:
            continue
    return pids


def test_cases_the_host_cannot_hold_skip_with_the_reason(run_suite):
    run = run_suite("--perf-precisions", "fp32,amp", "--perf-case", "1n64g_fp32_b2",
                    "--perf-batches", "2", "--perf-launcher", "local", "-k",
                    "amp or 1n64g or 2n1g",
                    *TINY_CASE_ARGS[:2], plots=True)
    assert run.outcome.ret == 0, run.output
    reasons = {case_id: row["message"] for case_id, row in run.cases.items()}
    assert all(row["verdict"] == "skipped" for row in run.cases.values())
    assert "precision amp needs a CUDA device" in reasons["1n1g_amp_b2"]
    assert "needs 64 worker processes, this host has" in reasons["1n64g_fp32_b2"]
    assert "2 nodes need a multi-node launcher" in reasons["2n1g_fp32_b2"]
    run.outcome.stdout.fnmatch_lines(["SKIPPED*needs 64 worker processes*"])
    # The table says why each case skipped, and that the session measured nothing.
    run.outcome.stdout.fnmatch_lines([
        "*ResNet50 training throughput*", "case*verdict",
        "1n1g_amp_b2 skipped: precision amp needs a CUDA device; this host has none*",
        "1n64g_fp32_b2 skipped: needs 64 worker processes*",
        "every case skipped: nothing was measured; --perf-require-baseline or --perf-strict "
        "make such a session fail"])
    # Nothing measured, nothing to plot: no empty scaling.png, and the session says why.
    run.outcome.stdout.fnmatch_lines(["no scaling plot: no case was measured (every case "
                                      "skipped or failed)"])
    assert not (run.results_dir / "scaling.png").exists()


def test_a_session_in_which_every_case_skipped_fails_under_require_baseline(run_suite):
    run = run_suite("--perf-precisions", "amp", "--perf-batches", "2", "-k", "1n1g",
                    "--perf-require-baseline")
    assert run.outcome.ret == 1, run.output
    run.outcome.assert_outcomes(skipped=1)
    run.outcome.stdout.fnmatch_lines(["every case skipped: nothing was measured; the session "
                                      "fails (--perf-require-baseline)"])


def test_old_spellings_stop_the_session_naming_the_new_ones(run_suite):
    """Issue 58: a spelling from before the prefix is no second way in: typed, the session
    stops before it measures anything, one line naming each spelling to use."""
    run = run_suite("--perf-case", "2n1g_fp32_b2", "-k", "2n1g_fp32_b2", "--launcher", "local",
                    "--perf-iters", "3", "--perf-iters=2", "--require-baseline")
    assert run.outcome.ret == 4, run.output
    assert ("ERROR: --launcher was renamed: use --perf-launcher; --require-baseline was "
            "renamed: use --perf-require-baseline; --perf-iters was renamed: use --perf-set "
            "iters=N") in run.output
    assert not run.results_dir.exists()


def test_full_profile_is_the_dlperf_matrix(run_suite):
    run = run_suite("--perf-profile", "full", "--collect-only", "-q")
    ids = sorted(line.split("[")[1].rstrip("]") for line in run.outcome.outlines if "[" in line)
    expected = sorted(f"{topology}_{variant}" for topology in
                      ("1n1g", "1n2g", "1n4g", "1n8g", "2n8g", "4n8g")
                      for variant in ("fp32_b128", "amp_b256"))
    assert ids == expected


def test_without_pytest_xdist_no_mark_is_unknown(run_suite):
    """A session where pytest-xdist is not there (`make perf` leaves it out): the cases' mark
    is registered by the suite itself, so no PytestUnknownMarkWarning."""
    run = run_suite("-p", "no:xdist", "--collect-only", "-q")
    assert run.outcome.ret == 0, run.output
    assert "1n1g_fp32_b8" in run.output
    assert "PytestUnknownMarkWarning" not in run.output and "xdist_group" not in run.output


@pytest.mark.xdist_group("xdist-groups")
def test_each_xdist_group_reaches_the_scheduler(request):
    """Under make test's `--dist loadgroup`, every test with an xdist_group mark carries its
    group in its id, which is all the scheduler reads to keep the group's tests, and the session
    they share, on one worker (tests/conftest.grouped_ids: pytest 9.2 had the groups ignored,
    silently, and both workers ran each shared session)."""
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not a worker of pytest-xdist's --dist loadgroup")
    grouped = {item.nodeid: sorted(str(mark.args[0] if mark.args else mark.kwargs["name"])
                                   for mark in item.iter_markers("xdist_group"))
               for item in request.session.items if item.get_closest_marker("xdist_group")}
    assert request.node.nodeid in grouped   # this one's own group, below
    lost = [nodeid for nodeid, names in grouped.items()
            if not nodeid.endswith("@" + "_".join(names))]
    assert not lost, f"{len(lost)} of {len(grouped)} grouped tests lost their group: {lost[:3]}"


def test_smoke_profile_ids(run_suite):
    run = run_suite("--perf-profile", "smoke", "--collect-only", "-q")
    ids = sorted(line.split("[")[1].rstrip("]") for line in run.outcome.outlines if "[" in line)
    assert ids == ["1n1g_bf16_b4", "1n1g_fp32_b8", "1n2g_fp32_b8", "2n1g_fp32_b8"]


@pytest.mark.parametrize("args, words", [
    (["--perf-runs", "0"], "argument --perf-runs: 0 must be at least 1"),
    (["--perf-tolerance", "5"], "argument --perf-tolerance: 5 must be a fraction"),
    (["--perf-case", "1n1g-fp32"], "case id '1n1g-fp32' does not parse"),
    (["--perf-case", "1n1g_fp16_b8"], "precision 'fp16'"),
    (["--perf-precisions", "fp16"], "argument --perf-precisions"),
    (["--perf-batches", "big"], "argument --perf-batches"),
    (["--perf-set", "timeout=-1"], "argument --perf-set: timeout=-1: -1 must be more than 0 "
                                   "seconds"),
    (["--perf-set", "memory-limit=lots"], "argument --perf-set: memory-limit=lots: 'lots' is not "
                                          "a size; use e.g. 512M or 40G"),
    (["--perf-set", "iter=5"], "argument --perf-set: 'iter=5': no key 'iter'; use KEY=VALUE "
                               "with KEY one of warmup, iters,"),
    (["--perf-launcher", "ssh"], "argument --perf-launcher: invalid choice"),
    (["--perf-launcher", "mpirun"], "--perf-launcher mpirun needs --perf-hostfile"),
    (["--perf-data-backend", "dali-cpu", "--perf-data-dir", "/nonexistent/imagenet"],
     "--perf-data-dir: data dir /nonexistent/imagenet does not exist"),
    (["--perf-data-dir", "/tmp"], "--perf-data-dir needs a real-data backend"),
    (["--perf-runs", "3", "--perf-set", "max-runs=2"],
     "--perf-set max-runs=2 is below --perf-runs 3"),
    (["--perf-export", "influx=out.json"],
     "argument --perf-export: 'influx=out.json': use FORMAT=PATH with FORMAT one of "
     "pytest-benchmark, github-action-benchmark, github-action-benchmark-smaller, bencher"),
    (["--perf-export", "bencher"], "argument --perf-export: 'bencher': use FORMAT=PATH"),
    (["--perf-export", "bencher="], "argument --perf-export: '' is a folder or empty"),
    (["--perf-export", "pytest-benchmark=."], "argument --perf-export: '.' is a folder or empty"),
])
def test_bad_option_values_are_usage_errors(run_suite, args, words):
    run = run_suite(*args)
    assert run.outcome.ret == 4, run.output
    assert words in run.output
    assert "Traceback" not in run.output


def test_existing_results_folder_is_never_reused(run_suite, tmp_path):
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "results.json").write_text("{}")
    run = run_suite("--perf-results", str(taken), "--collect-only")
    assert run.outcome.ret == 4
    assert f"results folder {taken} already exists and is not empty" in run.output
    assert (taken / "results.json").read_text() == "{}"


def test_readmes_first_example_on_a_cpu_host_ends_with_what_the_host_has(run_suite):
    run = run_suite("-k", "1n8g_amp")
    assert run.outcome.ret == 5, run.output   # pytest's "no tests ran": nothing selected
    run.outcome.stdout.fnmatch_lines([
        "-k '1n8g_amp' selects none of this session's cases: the smoke profile here has "
        "1n1g_bf16_b4, 1n1g_fp32_b8, 1n2g_fp32_b8, 2n1g_fp32_b8; the full profile "
        "(--perf-profile full) has 1n8g_amp_b256, measured on CUDA devices*"])
