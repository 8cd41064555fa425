"""Results where CI users look: JUnit properties, GitHub's job summary, pytest-benchmark's JSON
(read back by the installed `pytest-benchmark compare`), github-action-benchmark and Bencher.

The format tests read a results.json that a real smoke session wrote (tests/data/); the session
tests read one `pytest perf_tests -n 2` with every export requested, which also shows that
under pytest-xdist the cases never overlap and share one results file."""
import copy
import json
import shutil
import subprocess
import xml.etree.ElementTree as ElementTree
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import REPO_ROOT, TINY_CASE_ARGS, baseline_document
from perf_tests.report.exports import (ExportRequests, bencher_metric_format,
                                       github_action_benchmark, pytest_benchmark_document,
                                       write_exports)
from perf_tests.core.cases import THROUGHPUT
from perf_tests.report.junit import junit_properties
from perf_tests.results.measures import MEASURES, Measure, own_verdict

STORED_RESULTS = Path(__file__).parent / "data" / "smoke-results.json"
CASE_IDS = ["1n1g_fp32_b2", "2n1g_fp32_b2"]
# What a case whose peak memory grew beyond its band adds to its row (its img/s passed).
MEMORY_GROWTH = {
    "kind": "throughput", "verdict": "regression", "throughput_verdict": "pass",
    "peak_memory_bytes": 1127 * 2 ** 20, "runs_peak_memory_bytes": [1120 * 2 ** 20,
                                                                    1127 * 2 ** 20,
                                                                    1130 * 2 ** 20],
    "baseline_peak_memory_bytes": 788 * 2 ** 20, "memory_delta": 0.43, "memory_tolerance": 0.1,
    "memory_regression": "1n1g_fp32_b2: peak memory (RSS ...) 788 MiB -> 1.10 GiB (+43%)"}


@pytest.fixture
def document() -> dict:
    return json.loads(STORED_RESULTS.read_text())


def pytest_benchmark_compare(*paths: Path, cwd: Path) -> subprocess.CompletedProcess:
    """The installed command line tool, as a user runs it."""
    command = shutil.which("pytest-benchmark")
    assert command, "pytest-benchmark is in requirements.txt and installs its command"
    return subprocess.run([command, "compare", "--columns", "median,ops,rounds", *map(str, paths)],
                          cwd=cwd, capture_output=True, text=True, timeout=120)


def test_junit_properties_name_the_case_figures(document):
    row = document["cases"]["1n1g_fp32_b2"]
    properties = dict(junit_properties("1n1g_fp32_b2", row))
    assert list(properties) == [
        "case_id", "verdict", "runs", "cv", "throughput", "throughput_unit", "throughput_runs",
        "throughput_baseline", "throughput_delta", "throughput_tolerance", "throughput_verdict",
        "speedup", "speedup_unit", "speedup_baseline", "speedup_tolerance", "speedup_verdict"]
    assert properties["verdict"] == properties["throughput_verdict"] == row["verdict"]
    assert float(properties["throughput"]) == pytest.approx(row["median_ips"], rel=1e-5)
    assert properties["throughput_unit"] == "img/s"
    assert properties["runs"] == str(len(row["runs_ips"]))
    assert [float(value) for value in properties["throughput_runs"].split()] == \
        pytest.approx(row["runs_ips"], rel=1e-5)
    assert float(properties["throughput_delta"]) == pytest.approx(row["delta"], rel=1e-5)
    # A case without runs or baseline says only what it has.
    assert junit_properties("1n1g_fp32_b2", {"verdict": "skipped", "runs_ips": []}) == [
        ("case_id", "1n1g_fp32_b2"), ("verdict", "skipped")]
    # Beside the speed: the memory, its growth and its own verdict, the energy; a failed
    # case's repro command.
    grown = {"verdict": "regression", "peak_memory_bytes": 1127 * 2 ** 20, "memory_delta": 0.43,
             "memory_tolerance": 0.1, "memory_regression": "1n1g_fp32_b8: peak memory ...",
             "joules_per_image": 0.0412, "repro": "python3 -m pytest 'x::y[1n1g_fp32_b8]'"}
    assert junit_properties("1n1g_fp32_b8", grown) == [
        ("case_id", "1n1g_fp32_b8"), ("verdict", "regression"),
        ("repro", "python3 -m pytest 'x::y[1n1g_fp32_b8]'"),
        ("peak-memory", str(1127 * 2 ** 20)), ("peak-memory_unit", "B"),
        ("peak-memory_delta", "0.43"), ("peak-memory_tolerance", "0.1"),
        ("peak-memory_verdict", "regression"), ("energy", "0.0412"), ("energy_unit", "J/img")]


def test_a_refresh_says_so_in_its_verdict_property():
    """A refresh (--perf-update-baselines=force) passes its test whatever it was judged
    against the entry it replaced: the verdict property says it was recorded, as the report's
    verdict column does, and the measure keeps its own verdict."""
    forced = {**MEMORY_GROWTH, "baseline_update": "37.4 -> 37.1 img/s, peak memory ...",
              "baseline_forced": ["peak memory (RSS ...) 778 MiB -> 1.06 GiB"]}
    properties = dict(junit_properties("1n1g_fp32_b2", forced))
    assert properties["verdict"] == "regression, recorded"
    assert properties["peak-memory_verdict"] == "regression"
    assert properties["baseline_update"] == forced["baseline_update"]


def test_pytest_benchmark_stats_are_seconds_per_image_from_the_runs(document):
    output = pytest_benchmark_document(document, REPO_ROOT)
    by_name = {bench["name"]: bench for bench in output["benchmarks"]}
    assert sorted(by_name) == CASE_IDS
    for case_id, bench in by_name.items():
        row = document["cases"][case_id]
        stats = bench["stats"]
        assert stats["data"] == pytest.approx([1 / value for value in row["runs_ips"]])
        assert stats["rounds"] == len(row["runs_ips"])
        assert 1 / stats["median"] == pytest.approx(row["median_ips"])
        # ops is pytest-benchmark's rounds / total: the harmonic mean of the runs' img/s.
        assert stats["ops"] == pytest.approx(len(row["runs_ips"]) /
                                             sum(1 / value for value in row["runs_ips"]))
        assert stats["iterations"] == 2 * 2 * row["nodes"] * row["gpus_per_node"]
        assert bench["group"] == case_id and case_id in bench["fullname"]
        assert bench["extra_info"]["verdict"] == row["verdict"]
        assert bench["extra_info"]["environment"] == document["environment"]
    measures = by_name["1n1g_fp32_b2"]["extra_info"]["measures"]
    assert measures["throughput"]["baseline"] == 30.0
    assert measures["throughput"]["unit"] == "img/s"
    assert list(measures) == ["throughput", "speedup"]
    assert output["machine_info"]["hardware"] == document["hardware"]
    assert output["machine_info"]["python_version"] and output["machine_info"]["cpu"]
    assert len(output["commit_info"]["id"]) == 40 and output["commit_info"]["branch"]


def test_dashboard_formats(document):
    entries = github_action_benchmark(document)
    assert [entry["name"] for entry in entries] == ["1n1g_fp32_b2", "1n1g_fp32_b2 speedup",
                                                   "2n1g_fp32_b2", "2n1g_fp32_b2 speedup"]
    for entry in entries[::2]:
        row = document["cases"][entry["name"]]
        assert set(entry) == {"name", "unit", "value", "range", "extra"}
        assert entry["unit"] == "img/s" and entry["value"] == row["median_ips"]
        assert entry["range"] == f"± {row['stdev_ips']:.4g}"
        assert f"; case: verdict {row['verdict']}, {len(row['runs_ips'])} runs" in entry["extra"]
    # The no-baseline case's img/s was not judged.
    assert entries[0]["extra"].startswith("throughput: verdict pass, baseline 30 img/s, delta "
                                          "-57.9%, tolerance 97.0%; case: verdict pass")
    assert entries[2]["extra"].startswith("throughput: verdict not judged, tolerance 15.0%")
    assert entries[1]["unit"] == "x" and "range" not in entries[1]   # no runs of its own
    # Nothing smaller-is-better was measured: no peak memory in these rows.
    assert github_action_benchmark(document, bigger_is_better=False) == []

    metrics = bencher_metric_format(document)
    assert sorted(metrics) == CASE_IDS
    for case_id, measures in metrics.items():
        row = document["cases"][case_id]
        runs = row["runs_ips"]
        assert measures == {"throughput": {"value": row["median_ips"],
                                           "lower_value": min(runs), "upper_value": max(runs)},
                            "speedup": {"value": row["speedup"]}}


def test_a_memory_regression_reaches_every_export(document):
    """Issue 65: the img/s passed, the peak memory grew past its band: every format carries
    the memory with its own verdict, beside the img/s with its own."""
    row = document["cases"]["1n1g_fp32_b2"]
    row.update(MEMORY_GROWTH)
    runs = MEMORY_GROWTH["runs_peak_memory_bytes"]
    assert bencher_metric_format(document)["1n1g_fp32_b2"]["peak-memory"] == {
        "value": 1127 * 2 ** 20, "lower_value": min(runs), "upper_value": max(runs)}
    [memory] = github_action_benchmark(document, bigger_is_better=False)
    assert (memory["name"], memory["unit"], memory["value"]) == (
        "1n1g_fp32_b2 peak-memory", "B", 1127 * 2 ** 20)
    assert memory["extra"].startswith("peak memory: verdict regression, baseline 8.263e+08 B, "
                                      "delta +43.0%, tolerance 10.0%; case: verdict regression")
    speed = github_action_benchmark(document)[0]
    assert speed["extra"].startswith("throughput: verdict pass, ")
    bench = pytest_benchmark_document(document, REPO_ROOT)["benchmarks"][0]
    assert bench["extra_info"]["verdict"] == "regression"
    assert bench["extra_info"]["measures"]["peak-memory"] == {
        "value": 1127 * 2 ** 20, "unit": "B", "runs": runs,
        "baseline": 788 * 2 ** 20, "delta": 0.43, "tolerance": 0.1, "verdict": "regression",
        "gated": True, "bigger_is_better": False, "band_is_absolute": False}
    assert bench["extra_info"]["measures"]["throughput"]["verdict"] == "pass"
    properties = dict(junit_properties("1n1g_fp32_b2", row))
    assert (properties["verdict"], properties["throughput_verdict"],
            properties["peak-memory_verdict"]) == ("regression", "pass", "regression")


def test_a_measure_added_to_a_kind_reaches_every_export(document, monkeypatch):
    """A measure added to a kind's tuple in results/measures.py, and its figures in the rows:
    every format carries it, its figures and its verdict, with no change to the exports."""
    data_wait = Measure("data-wait", "input wait", "ms", "data_wait_ms", False, True,
                        own_verdict("data_wait_verdict"), runs_key="runs_data_wait_ms",
                        baseline_key="baseline_data_wait_ms", delta_key="data_wait_delta")
    monkeypatch.setitem(MEASURES, THROUGHPUT, (*MEASURES[THROUGHPUT], data_wait))
    document["cases"]["1n1g_fp32_b2"].update(
        data_wait_ms=4.0, runs_data_wait_ms=[3.0, 4.0, 6.0], baseline_data_wait_ms=2.0,
        data_wait_delta=1.0, data_wait_verdict="regression")
    assert bencher_metric_format(document)["1n1g_fp32_b2"]["data-wait"] == {
        "value": 4.0, "lower_value": 3.0, "upper_value": 6.0}
    [entry] = github_action_benchmark(document, bigger_is_better=False)
    assert (entry["name"], entry["unit"], entry["value"]) == ("1n1g_fp32_b2 data-wait", "ms", 4.0)
    assert entry["extra"].startswith("input wait: verdict regression, baseline 2 ms, "
                                     "delta +100.0%")
    extra_info = pytest_benchmark_document(document, REPO_ROOT)["benchmarks"][0]["extra_info"]
    assert extra_info["measures"]["data-wait"]["verdict"] == "regression"
    properties = dict(junit_properties("1n1g_fp32_b2", document["cases"]["1n1g_fp32_b2"]))
    assert (properties["data-wait"], properties["data-wait_runs"],
            properties["data-wait_verdict"]) == ("4", "3 4 6", "regression")
    # The other case has no such figure: no such entry.
    assert "data-wait" not in bencher_metric_format(document)["2n1g_fp32_b2"]


def test_unmeasured_cases_are_left_out_of_every_format(document):
    document["cases"]["1n1g_amp_b2"] = {"nodes": 1, "gpus_per_node": 1, "batch_per_device": 2,
                                        "precision": "amp", "runs_ips": [],
                                        "verdict": "skipped"}
    assert {entry["name"].split()[0] for entry in github_action_benchmark(document)} == \
        set(CASE_IDS)
    assert sorted(bencher_metric_format(document)) == CASE_IDS
    benchmarks = pytest_benchmark_document(document, REPO_ROOT)["benchmarks"]
    assert [bench["name"] for bench in benchmarks] == CASE_IDS


TTT_CASE = "1n1g_fp32_b16_ttt"


@pytest.fixture
def with_time_to_train(document) -> dict:
    """The stored session plus a time-to-train case: two of its three trainings reached the
    target, the second stopped at its epoch limit below it."""
    document["cases"][TTT_CASE] = {
        "nodes": 1, "gpus_per_node": 1, "batch_per_device": 16, "precision": "fp32",
        "runs_ips": [31.0, 29.5, 30.2], "median_ips": 30.2, "stdev_ips": 0.75,
        "runs_time_to_train_s": [40.5, None, 38.0], "time_to_train_s": 39.25,
        "reached_target": False, "runs_reached_target": [True, False, True],
        "top1": 0.82, "runs_top1": [0.84, 0.78, 0.82], "target_top1": 0.8,
        "verdict": "not-converged", "settings": {"timed_iters": 4}}
    return document


def test_time_to_train_cases_carry_their_time_and_top1(with_time_to_train):
    row = with_time_to_train["cases"][TTT_CASE]
    properties = dict(junit_properties(TTT_CASE, row))
    assert properties["time-to-train"] == "39.25" and properties["time-to-train_unit"] == "s"
    assert properties["time-to-train_runs"] == "40.5 - 38"   # the second never reached it
    assert properties["top-1"] == "82" and properties["top-1_unit"] == "%"
    assert properties["reached_target"] == "false" and properties["target_top1"] == "0.8"

    by_name = {bench["name"]: bench
               for bench in pytest_benchmark_document(with_time_to_train, REPO_ROOT)["benchmarks"]}
    # A round per training that reached the target, its whole time: not img/s windows.
    stats = by_name[TTT_CASE]["stats"]
    assert stats["data"] == [40.5, 38.0] and stats["iterations"] == 1
    assert stats["median"] == pytest.approx(39.25)
    assert by_name[TTT_CASE]["extra_info"]["runs_reached_target"] == [True, False, True]
    assert by_name[TTT_CASE]["extra_info"]["measures"]["top-1"]["value"] == pytest.approx(82.0)
    assert by_name[TTT_CASE]["options"]["timer"].startswith("wall clock from the first step")

    # Top-1 charts with the bigger-is-better measures, the time with the smaller.
    # (and the training's img/s, recorded, under the case's own name as every img/s)
    top1, speed = [entry for entry in github_action_benchmark(with_time_to_train)
                   if entry["name"].startswith(TTT_CASE)]
    assert (speed["name"], speed["unit"]) == (TTT_CASE, "img/s")
    assert (top1["name"], top1["unit"]) == (f"{TTT_CASE} top-1", "%")
    assert top1["value"] == pytest.approx(82.0)
    [time] = github_action_benchmark(with_time_to_train, bigger_is_better=False)
    assert (time["name"], time["unit"], time["value"]) == (f"{TTT_CASE} time-to-train", "s",
                                                           39.25)
    assert time["range"] == "± 1.768"   # of the two trainings that reached the target
    assert ("time to train 39.2 s (2 of 3 reached the target), top-1 82.00%" in time["extra"])

    measures = bencher_metric_format(with_time_to_train)[TTT_CASE]
    assert measures["time-to-train"] == {"value": 39.25, "lower_value": 38.0,
                                         "upper_value": 40.5}
    assert measures["top-1"] == pytest.approx({"value": 82.0, "lower_value": 78.0,
                                               "upper_value": 84.0})


def test_top1s_absolute_band_reads_in_points_not_percent(with_time_to_train):
    """Top-1's band is 5 points of accuracy, not 5% of the baseline: the exports carry it in
    the measure's unit and say so."""
    with_time_to_train["cases"][TTT_CASE].update(
        baseline_top1=0.83, accuracy_tolerance=0.05, accuracy_verdict="pass")
    top1 = {entry["name"]: entry["extra"]
            for entry in github_action_benchmark(with_time_to_train)}[f"{TTT_CASE} top-1"]
    assert "baseline 83 %, tolerance +-5 %" in top1
    properties = dict(junit_properties(TTT_CASE, with_time_to_train["cases"][TTT_CASE]))
    assert properties["top-1_tolerance"] == "5"
    bench = next(bench for bench in pytest_benchmark_document(with_time_to_train,
                                                              REPO_ROOT)["benchmarks"]
                 if bench["name"] == TTT_CASE)
    assert bench["extra_info"]["measures"]["top-1"]["band_is_absolute"] is True


def test_a_long_training_reads_as_the_verdict_line_writes_it(with_time_to_train):
    """The dashboards' note and the verdict line format a time to train alike (thousands
    separated from 1000 s)."""
    row = with_time_to_train["cases"][TTT_CASE]
    row.update(runs_time_to_train_s=[4512.25, None, 4200.0], time_to_train_s=4356.125)
    [entry] = github_action_benchmark(with_time_to_train, bigger_is_better=False)
    assert "time to train 4,356 s (2 of 3 reached the target)" in entry["extra"]


def test_a_training_that_never_converged_has_no_pytest_benchmark_rounds(with_time_to_train):
    row = with_time_to_train["cases"][TTT_CASE]
    row.update(runs_time_to_train_s=[None, None, None], time_to_train_s=None)
    names = [bench["name"]
             for bench in pytest_benchmark_document(with_time_to_train, REPO_ROOT)["benchmarks"]]
    assert names == CASE_IDS
    assert "time-to-train" not in bencher_metric_format(with_time_to_train)[TTT_CASE]
    extra = {entry["name"]: entry["extra"]
             for entry in github_action_benchmark(with_time_to_train)}[f"{TTT_CASE} top-1"]
    assert "no run reached the target" in extra


def test_ab_cases_carry_the_paired_ratio(document):
    row = document["cases"]["1n1g_fp32_b2"]
    row.update(kind="ab", ratio=0.8987, ratio_ci=[0.85, 0.93], pairs=6, ratio_of_medians=0.91)
    properties = dict(junit_properties("1n1g_fp32_b2", row))
    assert (properties["pair-ratio"], properties["ratio_ci"], properties["pairs"]) == \
        ("0.8987", "0.85 0.93", "6")
    extra = {entry["name"]: entry["extra"] for entry in github_action_benchmark(document)}
    assert "candidate/reference 0.899 (95% CI 0.850-0.930) over 6 pairs" in extra["1n1g_fp32_b2"]
    assert extra["1n1g_fp32_b2 pair-ratio"].startswith("candidate/reference: verdict pass, ")
    bench = pytest_benchmark_document(document, REPO_ROOT)["benchmarks"][0]
    assert bench["extra_info"]["ratio_ci"] == [0.85, 0.93]


def test_an_unwritable_export_is_one_line_and_the_others_still_land(document, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    requests = ExportRequests(exports=(("bencher", blocker / "bencher.json"),
                                       ("github-action-benchmark", tmp_path / "gab.json")))
    written, errors = write_exports(requests, document, "# report\n", REPO_ROOT)
    assert written == [tmp_path / "gab.json"]
    assert errors == [f"--perf-export bencher {blocker / 'bencher.json'} could not be written "
                      "(Not a directory); pass a writable path"]


def test_pytest_benchmark_compare_shows_two_sessions_side_by_side(document, tmp_path):
    slower = copy.deepcopy(document)
    for row in slower["cases"].values():
        row["runs_ips"] = [value / 2 for value in row["runs_ips"]]
    before, after = tmp_path / "before.json", tmp_path / "after.json"
    before_benchmarks = pytest_benchmark_document(document, REPO_ROOT)
    before.write_text(json.dumps(before_benchmarks))
    after.write_text(json.dumps(pytest_benchmark_document(slower, REPO_ROOT)))
    done = pytest_benchmark_compare(before, after, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    for case_id in CASE_IDS:
        # One table per case, a row per session: median in ms per image, OPS in img/s.
        assert f"benchmark '{case_id}': 2 tests" in done.stdout
        # The source is the file name less the prefix its path shares with the other's.
        rows = {line.split()[1].strip("()").split("/")[-1]: line.split()[2:]
                for line in done.stdout.splitlines() if line.startswith(f"{case_id} (")}
        assert set(rows) == {"before", "after"}, done.stdout
        median_ms, _, ops, _, rounds = rows["before"]
        assert float(median_ms) == pytest.approx(1000 / document["cases"][case_id]["median_ips"],
                                                 rel=1e-3)
        ops_before = before_benchmarks["benchmarks"][CASE_IDS.index(case_id)]["stats"]["ops"]
        assert float(ops) == pytest.approx(ops_before, rel=1e-3)
        assert rows["after"][3] == "(0.50)" and rounds == "3"


# Bencher Metric Format (bencher.dev/docs/reference/bencher-metric-format): benchmark name ->
# measure slug -> a metric, `value` required, `lower_value` and `upper_value` optional numbers.
BENCHER_METRIC_FORMAT = {
    "type": "object",
    "additionalProperties": {
        "type": "object", "minProperties": 1,
        "propertyNames": {"pattern": "^[a-z0-9][a-z0-9-]*$"},   # a slug
        "additionalProperties": {
            "type": "object", "required": ["value"], "additionalProperties": False,
            "properties": {"value": {"type": "number"}, "lower_value": {"type": "number"},
                           "upper_value": {"type": "number"}}}}}


def test_bencher_file_is_bencher_metric_format(document, with_time_to_train):
    jsonschema = pytest.importorskip("jsonschema")
    document["cases"]["1n1g_fp32_b2"].update(MEMORY_GROWTH)
    metrics = json.loads(json.dumps(bencher_metric_format(document)))   # as the file holds it
    jsonschema.validate(metrics, BENCHER_METRIC_FORMAT)
    assert set(metrics["1n1g_fp32_b2"]) == {"throughput", "speedup", "peak-memory"}
    assert set(metrics[TTT_CASE]) == {"time-to-train", "top-1", "throughput"}
    for measures in metrics.values():
        for metric in measures.values():
            assert metric.get("lower_value", metric["value"]) <= metric["value"] <= \
                metric.get("upper_value", metric["value"])
    with pytest.raises(jsonschema.ValidationError):   # the schema does hold something
        jsonschema.validate({"case": {"throughput": {"median": 1.0}}}, BENCHER_METRIC_FORMAT)


def test_pytest_benchmark_compare_reads_two_files_that_carry_the_memory(document, tmp_path):
    """pytest-benchmark compare tables time statistics only (its columns are min ... ops, and
    it prints no extra_info): it reads two sessions whose memory differs and shows their
    img/s; the memory and its verdict are in each benchmark's extra_info, as read back here
    by pytest-benchmark's own file storage."""
    from pytest_benchmark.storage.file import FileStorage

    grown = copy.deepcopy(document)
    grown["cases"]["1n1g_fp32_b2"].update(MEMORY_GROWTH)
    before, after = tmp_path / "0001_before.json", tmp_path / "0002_after.json"
    before.write_text(json.dumps(pytest_benchmark_document(document, REPO_ROOT)))
    after.write_text(json.dumps(pytest_benchmark_document(grown, REPO_ROOT)))
    done = pytest_benchmark_compare(before, after, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "benchmark '1n1g_fp32_b2': 2 tests" in done.stdout
    storage = FileStorage(str(tmp_path), default_machine_id=None, logger=None)
    loaded = {path.name: saved for path, saved in storage.load()}
    memory = {name: {bench["name"]: bench["extra_info"]["measures"].get("peak-memory")
                     for bench in saved["benchmarks"]} for name, saved in loaded.items()}
    assert memory["0001_before.json"]["1n1g_fp32_b2"] is None   # not measured then
    assert memory["0002_after.json"]["1n1g_fp32_b2"]["verdict"] == "regression"
    assert memory["0002_after.json"]["1n1g_fp32_b2"]["value"] == 1127 * 2 ** 20


JUNIT_CASES = {"1n1g_fp32_b2": {**MEMORY_GROWTH, "median_ips": 30.2, "runs_ips": [30.0, 30.2]},
               "1n2g_fp32_b2": {"kind": "throughput", "verdict": "pass", "median_ips": 55.0,
                                "runs_ips": [54.0, 55.0], "baseline_ips": 54.5, "delta": 0.009,
                                "tolerance": 0.1, "peak_memory_bytes": 800 * 2 ** 20,
                                "memory_delta": 0.01, "memory_tolerance": 0.1}}


def test_junitparser_default_reader_sees_each_measure_and_the_failed_case(pytester):
    """pytest's --junitxml, as the suite's test functions fill it (their properties, the
    plugin's copy to the testsuite; under pytest-xdist), read by junitparser's default
    `JUnitXml`: each case's measures and verdicts, and the regression's testcase failed."""
    junitparser = pytest.importorskip("junitparser")
    pytester.makepyfile(test_cases=f"""
        import pytest
        from perf_tests.report.junit import junit_properties

        CASES = {JUNIT_CASES!r}

        @pytest.mark.parametrize("case_id", sorted(CASES))
        def test_training_throughput(case_id, request):
            request.node.user_properties.extend(junit_properties(case_id, CASES[case_id]))
            if CASES[case_id]["verdict"] == "regression":
                pytest.fail(case_id + ": peak memory ...")
    """)
    junit = pytester.path / "junit.xml"
    outcome = pytester.runpytest_subprocess("-p", "perf_tests.plugin", "-p", "no:cacheprovider",
                                            "-n", "2", f"--junitxml={junit}")
    outcome.assert_outcomes(passed=1, failed=1)
    [suite] = junitparser.JUnitXml.fromfile(str(junit))
    properties = {prop.name: prop.value for prop in suite.properties()}
    assert properties["1n1g_fp32_b2:verdict"] == "regression"
    assert properties["1n1g_fp32_b2:peak-memory"] == str(1127 * 2 ** 20)
    assert properties["1n1g_fp32_b2:peak-memory_verdict"] == "regression"
    assert properties["1n1g_fp32_b2:throughput_verdict"] == "pass"
    assert properties["1n2g_fp32_b2:verdict"] == "pass"
    assert properties["1n2g_fp32_b2:peak-memory_verdict"] == "pass"
    cases = {case.name: case for case in suite}
    assert cases["test_training_throughput[1n1g_fp32_b2]"].is_failure
    assert cases["test_training_throughput[1n2g_fp32_b2]"].is_passed


def test_pytest_benchmark_plugin_stays_out_of_suite_sessions(run_suite, pytester):
    run = run_suite("--help")
    assert run.outcome.ret == 0, run.output
    # pytest-benchmark's JSON is one --perf-export target; its old option stays out of --help.
    assert "--perf-export=FORMAT=PATH" in run.output
    assert "--perf-benchmark-json" not in run.output
    assert "--benchmark-json" not in run.output
    assert not (pytester.path / ".benchmarks").exists()


# The tests that read the session below: one worker runs them (make test's --dist loadgroup).
READS_CI_SESSION = pytest.mark.xdist_group("exports-ci-session")


@pytest.fixture(scope="module")
def ci_session(shared_suite, tmp_path_factory):
    """A session under pytest-xdist with every export requested, as CI runs it after a step
    that wrote its own summary: `.run`, and the files it was asked for under `.folder`."""
    folder = tmp_path_factory.mktemp("ci-exports")
    summary = folder / "step-summary.md"
    summary.write_text("## an earlier step\n")
    baseline = baseline_document({"1n1g_fp32_b2": {"median_ips": 30.0, "tolerance": 0.97}})
    run = shared_suite("-n", "2", "-k", "1n1g", "--perf-batches", "2,3", *TINY_CASE_ARGS,
                       "--perf-runs", "1", "--perf-set", "max-runs=1", "--junitxml",
                       str(folder / "junit.xml"), "--perf-export",
                       f"pytest-benchmark={folder / 'benchmark' / 'session.json'}",
                       "--perf-export", f"github-action-benchmark={folder / 'gab.json'}",
                       "--perf-export",
                       f"github-action-benchmark-smaller={folder / 'gab-smaller.json'}",
                       "--perf-export", f"bencher={folder / 'bencher.json'}", baseline=baseline,
                       env={"GITHUB_STEP_SUMMARY": str(summary)})
    return SimpleNamespace(run=run, folder=folder)


@pytest.mark.slow
@READS_CI_SESSION
def test_under_xdist_cases_never_overlap_and_share_one_results_file(ci_session):
    run = ci_session.run
    assert run.outcome.ret == 0, run.output
    assert set(run.cases) == {"1n1g_fp32_b2", "1n1g_fp32_b3"}
    windows = []
    for case_id in run.cases:
        record = json.loads((run.results_dir / case_id / "run-1.json").read_text())
        end = datetime.strptime(record["finished_at"], "%Y-%m-%dT%H:%M:%SZ").timestamp()
        windows.append((end - record["launch_seconds"], end))
    (first_start, first_end), (second_start, second_end) = sorted(windows)
    assert first_end <= second_start + 1.0  # finished_at has whole seconds
    run.outcome.stdout.fnmatch_lines(["*ResNet50 training throughput*"])
    # Each worker's progress reaches the terminal, marked with the worker.
    run.outcome.stderr.fnmatch_lines(["[[]gw?[]] 1n1g_fp32_b? run 1/1: * img/s*"])


@pytest.mark.slow
@READS_CI_SESSION
def test_a_session_reports_where_ci_looks(ci_session, tmp_path, document):
    run, folder = ci_session.run, ci_session.folder
    summary, junit = folder / "step-summary.md", folder / "junit.xml"
    benchmark_json = folder / "benchmark" / "session.json"
    assert run.outcome.ret == 0, run.output
    cases = run.cases

    # JUnit (default xunit2 family, through pytest-xdist): each case's figures as properties.
    testcases = {case.get("name"): case for case in ElementTree.parse(junit).iter("testcase")}
    for case_id, row in cases.items():
        properties = {prop.get("name"): prop.get("value") for prop in
                      testcases[f"test_training_throughput[{case_id}]"].iter("property")}
        assert properties["verdict"] == row["verdict"]
        assert float(properties["throughput"]) == pytest.approx(row["median_ips"], rel=1e-5)
        assert properties["runs"] == "1"
        assert properties["peak-memory_unit"] == "B"   # every run records its peak
    assert testcases["test_training_throughput[1n1g_fp32_b2]"].find(
        ".//property[@name='throughput_baseline']").get("value") == "30"
    assert "is incompatible with junit_family" not in run.output
    # junitparser's default reader: the same pairs as testsuite properties, named by case.
    junitparser = pytest.importorskip("junitparser")
    [suite] = junitparser.JUnitXml.fromfile(str(junit))
    suite_properties = {prop.name: prop.value for prop in suite.properties()}
    for case_id, row in cases.items():
        assert suite_properties[f"{case_id}:verdict"] == row["verdict"]
        assert float(suite_properties[f"{case_id}:peak-memory"]) == row["peak_memory_bytes"]
    assert {case.name: case.is_passed for case in suite} == {
        f"test_training_throughput[{case_id}]": True for case_id in cases}

    # GitHub: the report appended after what the earlier step wrote.
    text = summary.read_text()
    assert text.startswith("## an earlier step\n# ResNet50 v1.5 training throughput")
    assert "| 1 | 1 | 3 | fp32 |" in text

    exported = json.loads((folder / "gab.json").read_text())
    assert [entry["name"] for entry in exported] == [
        "1n1g_fp32_b2", "1n1g_fp32_b2 speedup", "1n1g_fp32_b3", "1n1g_fp32_b3 speedup"]
    smaller = json.loads((folder / "gab-smaller.json").read_text())
    assert [entry["name"] for entry in smaller] == ["1n1g_fp32_b2 peak-memory",
                                                   "1n1g_fp32_b3 peak-memory"]
    assert smaller[0]["unit"] == "B" and smaller[0]["value"] == \
        cases["1n1g_fp32_b2"]["peak_memory_bytes"]
    assert json.loads((folder / "bencher.json").read_text())["1n1g_fp32_b3"]["throughput"][
        "value"] == cases["1n1g_fp32_b3"]["median_ips"]
    run.outcome.stdout.fnmatch_lines([f"exported: {summary}, {benchmark_json}, *gab.json, "
                                      "*gab-smaller.json, *bencher.json"])

    # pytest-benchmark compare reads this session beside the stored one.
    stored = tmp_path / "stored.json"
    stored.write_text(json.dumps(pytest_benchmark_document(document, REPO_ROOT)))
    done = pytest_benchmark_compare(stored, benchmark_json, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "benchmark '1n1g_fp32_b2': 2 tests" in done.stdout
    assert "benchmark '1n1g_fp32_b3': 1 tests" in done.stdout
    assert not (run.cwd / ".benchmarks").exists()
    assert "PytestBenchmarkWarning" not in run.output
