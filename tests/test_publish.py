"""rn50-perf publish (tools/history/publish.py): the history site from sessions and baseline
files, as data (data.js) the page draws; each bad input one line, the rest still published. The
sessions are generated ones (tools/history/site/generated.py: a history whose stack is upgraded at
known sessions) and handmade files; tests/test_publish_browser.py opens the site in Chromium."""
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO_ROOT, run_tool
from perf_tests.environment.differences import environment_diff
from tools.history.site.folder import CHART_LIBRARY, DATA_SCRIPT, DATA_VARIABLE
from tools.history.site.generated import HARDWARE, PEAK_MEMORY, case_ids, write_sessions

SESSIONS, CASES = 40, 4


def site_data(site: Path) -> dict:
    """The page's data, as data.js hands it to JSON.parse (a single-quoted string)."""
    text = (site / DATA_SCRIPT).read_text()
    prefix, suffix = f"window.{DATA_VARIABLE} = JSON.parse('", "');\n"
    assert text.startswith(prefix) and text.endswith(suffix)
    quoted = text[len(prefix):-len(suffix)]
    return json.loads(re.sub(r"\\(['\\])", r"\1", quoted))


def inputs_of(folder: Path) -> dict[str, dict]:
    """Each generated session's results.json by its folder's name."""
    return {path.parent.name: json.loads(path.read_text())
            for path in sorted(folder.glob("*/results.json"))}


def baseline_with_lineage(path: Path) -> Path:
    """A baseline entry that replaced two before it (the `lineage` field, oldest first), each
    with its peak memory; the entry's band is auto, as every entry recorded without a number is,
    and the generated sessions (judged against 6100 img/s) used one."""
    lineage = [{"median_ips": 6300.0, "recorded_at": "2025-11-01T10:00:00Z", "runs": 10,
                "tolerance": 0.05, "source": "measured", "changed": "torch 2.10.0 -> 2.11.0",
                "peak_memory_bytes": 36 * 2**30},
               {"median_ips": 6150.0, "recorded_at": "2025-12-01T10:00:00Z", "runs": 10,
                "tolerance": None, "source": "promoted", "changed": "driver 575.51 -> 580.159"}]
    path.write_text(json.dumps({"schema_version": 1, "hardware": HARDWARE, "entries": {
        "1n1g_amp_b256": {"median_ips": 6100.0, "runs_ips": [6090.0, 6100.0, 6110.0],
                          "tolerance": "auto", "recorded_at": "2025-12-20T10:00:00Z",
                          "source": "measured", "peak_memory_bytes": PEAK_MEMORY["amp"],
                          "lineage": lineage}}}))
    return path


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("generated") / "perf_results"
    write_sessions(folder, SESSIONS, cases=CASES, ab_every=10)
    return folder


@pytest.fixture(scope="module")
def published(generated, tmp_path_factory):
    """The site of the generated sessions and a baseline file with a lineage."""
    folder = tmp_path_factory.mktemp("published")
    baseline = baseline_with_lineage(folder / f"{HARDWARE}.json")
    done = run_tool("publish", generated, baseline, "--output", folder / "site")
    return done, folder / "site"


def test_the_site_holds_every_session_and_series(published, generated):
    done, site = published
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout.startswith(f"published {SESSIONS} sessions ({CASES} series, ")
    assert f"4 A/B sessions, 1 baseline file) in {site / 'index.html'}: " in done.stdout
    for name in ("index.html", CHART_LIBRARY, "common.js", "diff.js", "series.js", "site.js"):
        assert (site / name).is_file(), name
    data = site_data(site)
    inputs = inputs_of(generated)
    assert [session["name"] for session in data["sessions"]] == sorted(inputs)
    assert [series["id"] for series in data["series"]] == sorted(
        f"{HARDWARE}/{case_id}" for case_id in case_ids(CASES))
    for series in data["series"]:
        expected = [(name, document["cases"][series["case_id"]]) for name, document in
                    inputs.items() if "candidate" not in document]
        assert [data["sessions"][point["session"]]["name"] for point in series["points"]] == \
            [name for name, _ in expected]
        for point, (_, row) in zip(series["points"], expected):
            assert point["value"] == round(row["median_ips"], 3)
            assert point["runs"] == row["runs_ips"] and point["verdict"] == row["verdict"]


def test_step_changes_are_found_where_the_stack_changed_and_named(published, generated):
    """The generated history's upgrades: torch at 40% of the sessions (-8%), the image,
    driver and NCCL at 70% (+5%), NCCL_ALGO at 85% (-3%)."""
    data = site_data(published[1])
    series = next(one for one in data["series"] if one["case_id"] == "1n1g_amp_b256")
    changed = [step["what_changed"] for step in series["steps"]]
    assert changed[0].startswith("torch 2.11.0+cu130 -> 2.12.0+cu130"), changed
    assert changed[1].startswith("image nvcr.io/nvidia/pytorch:26.09-py3 [docker: sha256:5f1e] "
                                 "-> nvcr.io/nvidia/pytorch:26.11-py3"), changed
    assert [data["sessions"][step["session"]]["name"] for step in series["steps"]][:2] == \
        [sorted(inputs_of(generated))[int(SESSIONS * 0.4)],
         sorted(inputs_of(generated))[int(SESSIONS * 0.7)]]
    assert series["steps"][0]["change"] == pytest.approx(-0.08, abs=0.01)
    assert {step["state"] for step in series["steps"]} == {"confirmed"}


def test_the_summary_counts_the_steps_that_hold_and_names_the_others(tmp_path):
    """`3 step changes` counts the confirmed steps that hold; unconfirmed and withdrawn ones
    are named beside them."""
    from tools.history.publish import summary
    states = [["confirmed", "unconfirmed"], ["withdrawn", "confirmed"], []]
    data = {"sessions": [{}] * 5, "ab": [], "baseline_files": ["b.json"],
            "series": [{"steps": [{"state": state} for state in steps]} for steps in states]}
    index = tmp_path / "index.html"
    index.write_text("")
    assert summary(data, index, 0.4) == (
        f"published 5 sessions (3 series, 2 step changes, 1 unconfirmed, 1 withdrawn, 0 A/B "
        f"sessions, 1 baseline file) in {index}: 0.4 s, 0.0 MB")


def test_ab_sessions_and_baseline_lineage_are_on_the_site(published, generated):
    data = site_data(published[1])
    inputs = inputs_of(generated)
    ab_names = [name for name, document in inputs.items() if "candidate" in document]
    assert [data["sessions"][ab["session"]]["name"] for ab in data["ab"]] == ab_names
    first = data["ab"][0]["cases"][0]
    row = inputs[ab_names[0]]["cases"][first["case_id"]]
    assert first["ratio"] == pytest.approx(row["ratio"], rel=1e-4) and first["pairs"] == 8
    assert first["environment_diff"] == row["environment_diff"]
    series = next(one for one in data["series"] if one["case_id"] == "1n1g_amp_b256")
    (entry,) = series["baselines"]
    assert [old["changed"] for old in entry["lineage"]] == ["torch 2.10.0 -> 2.11.0",
                                                           "driver 575.51 -> 580.159"]
    assert entry["median_ips"] == 6100.0 and entry["runs"] == 3


def test_the_environments_are_stored_once_with_what_the_gate_compares(published, generated):
    data = site_data(published[1])
    # One per stack and commit (4 commits, a new one every 10 sessions, across 3 upgrades:
    # 7), and the baseline entry's (none recorded).
    assert len(data["environments"]) == 8 and {} in data["environments"]
    inputs = inputs_of(generated)
    for session in data["sessions"][:3]:
        facts = data["environments"][session["environment"]]
        original = inputs[session["name"]]["environment"]
        assert facts["torch"] == original["torch"] and facts["variables"] == {}
        assert environment_diff(facts, facts).startswith("no change in image, device, driver")


def test_each_bad_input_is_one_line_and_the_rest_is_published(generated, tmp_path):
    bad = tmp_path / "bad"
    (bad / "empty").mkdir(parents=True)
    corrupt = bad / "corrupt" / "results.json"
    corrupt.parent.mkdir()
    corrupt.write_text('{"schema_version": 1, "cases": {')
    newer = bad / "newer" / "results.json"
    newer.parent.mkdir()
    document = json.loads(next(generated.glob("*/results.json")).read_text())
    newer.write_text(json.dumps({**document, "schema_version": 2}))
    first = sorted(generated.glob("*"))[0]
    twin = bad / "elsewhere" / first.name
    shutil.copytree(first, twin)
    done = run_tool("publish", generated, bad / "empty", corrupt, newer, twin,
                    "--output", tmp_path / "site")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        f"rn50-perf publish: left out: input {bad / 'empty'} holds no session (no results.json in "
        "it or its folders) and no baseline file; pass a results.json, a session folder, a folder "
        "of them, or a baseline file",
        f"rn50-perf publish: left out: input {corrupt} is not valid JSON (Expecting property name "
        "enclosed in double quotes: line 1 column 33 (char 32)); pass a results.json, a session "
        "folder, a folder of them, or a baseline file",
        f"rn50-perf publish: left out: results file {newer} has schema_version 2, newer than "
        "this checkout reads (1); update this checkout to read it",
        f"rn50-perf publish: two sessions are named {first.name} ({first / 'results.json'} and "
        f"{twin / 'results.json'}): the second is published as {first.name}-2; rename one of "
        "the folders to keep its name"]
    assert done.stdout.startswith(f"published {SESSIONS + 1} sessions")
    data = site_data(tmp_path / "site")
    assert data["notes"] == [line.removeprefix("rn50-perf publish: ") for line in
                             done.stderr.splitlines()]
    assert f"{first.name}-2" in [session["name"] for session in data["sessions"]]


def test_nothing_to_publish_is_one_line_and_status_2(tmp_path):
    (tmp_path / "none").mkdir()
    done = run_tool("publish", tmp_path / "none", tmp_path / "missing", "--output",
                    tmp_path / "site")
    assert done.returncode == 2 and not (tmp_path / "site").exists()
    assert done.stderr == (
        f"rn50-perf publish: error: nothing to publish in {tmp_path / 'none'}, "
        f"{tmp_path / 'missing'}; "
        f"left out: input {tmp_path / 'none'} holds no session (no results.json in it or its "
        "folders) and no baseline file; pass a results.json, a session folder, a folder of "
        f"them, or a baseline file; left out: input {tmp_path / 'missing'} does not exist; "
        "check the path\n")


def test_a_site_is_replaced_whole_and_another_folder_is_never_written(published, tmp_path):
    _, site = published
    copy = tmp_path / "site"
    shutil.copytree(site, copy)
    (copy / "stale.txt").write_text("left by an older site")
    baselines = [REPO_ROOT / "baselines" / "nvidia-h200.json"]
    done = run_tool("publish", *baselines, "--output", copy)
    assert done.returncode == 0, done.stderr
    assert not (copy / "stale.txt").exists() and site_data(copy)["sessions"] == []
    assert [path.name for path in tmp_path.iterdir()] == ["site"]  # no folder left beside it
    other = tmp_path / "notes"
    other.mkdir()
    (other / "mine.txt").write_text("keep")
    done = run_tool("publish", *baselines, "--output", other)
    assert done.returncode == 2 and done.stderr == (
        f"rn50-perf publish: error: output {other} holds files this tool did not write; pass a new "
        "folder with --output (a site it wrote is replaced whole)\n")
    assert [path.name for path in other.iterdir()] == ["mine.txt"]


def test_max_batch_and_time_to_train_rows_are_series_of_their_own(tmp_path):
    """Rows of other kinds than throughput: a max batch search (images per device) and a
    time-to-train case (seconds, lower is better), each its own series."""
    rows = {"1n1g_amp_maxbatch": {"kind": "max-batch", "nodes": 1, "gpus_per_node": 1,
                                  "batch_per_device": 256, "precision": "amp", "runs_ips": [],
                                  "max_batch": 288, "oom_batch": 320, "verdict": "pass"},
            "1n1g_amp_b256_ttt": {"kind": "time-to-train", "nodes": 1, "gpus_per_node": 1,
                                  "batch_per_device": 256, "precision": "amp",
                                  "runs_ips": [5900.0, 5910.0], "median_ips": 5905.0,
                                  "runs_time_to_train_s": [3605.5, 3590.25],
                                  "time_to_train_s": 3597.875, "top1": 0.7601,
                                  "verdict": "pass"}}
    for day in (1, 2):
        folder = tmp_path / "perf_results" / f"s{day}"
        folder.mkdir(parents=True)
        (folder / "results.json").write_text(json.dumps({
            "schema_version": 1, "hardware": HARDWARE, "started_at": f"2026-02-0{day}T10:00:00Z",
            "environment": {"torch": "2.12.0"}, "cases": rows}))
    done = run_tool("publish", tmp_path / "perf_results", "--output", tmp_path / "site")
    assert done.returncode == 0, done.stderr
    series = {one["case_id"]: one for one in site_data(tmp_path / "site")["series"]}
    batch, train = series["1n1g_amp_maxbatch"], series["1n1g_amp_b256_ttt"]
    assert (batch["kind"], batch["unit"], batch["topology"]) == ("max-batch",
                                                                  "samples/device", "1n1g")
    assert [point["value"] for point in batch["points"]] == [288, 288]
    assert batch["points"][0]["oom_batch"] == 320 and batch["steps"] == []
    assert (train["kind"], train["unit"], train["lower_is_better"]) == ("time-to-train", "s",
                                                                        True)
    assert [point["value"] for point in train["points"]] == [3597.875, 3597.875]
    assert train["points"][0]["runs"] == [3605.5, 3590.25]
    assert [measure["slug"] for measure in train["measures"]] == ["time-to-train", "top-1",
                                                                  "throughput"]
    assert train["points"][0]["measures"]["top-1"] == {"value": 76.01, "verdict": "recorded"}


def test_a_top1_band_is_drawn_absolute(tmp_path):
    """Top-1's band is absolute (0.05 in the row: 5 points of accuracy): the site's data holds
    it in the measure's unit and says so, and the page draws baseline +- band, not baseline x
    (1 +- band) as it draws a throughput band."""
    row = {"kind": "time-to-train", "nodes": 1, "gpus_per_node": 1, "batch_per_device": 256,
           "precision": "amp", "runs_ips": [5900.0], "median_ips": 5900.0,
           "runs_time_to_train_s": [3605.5], "time_to_train_s": 3605.5, "top1": 0.7601,
           "runs_top1": [0.7601], "baseline_top1": 0.765, "accuracy_tolerance": 0.05,
           "accuracy_verdict": "pass", "baseline_time_to_train_s": 3600.0, "tolerance": 0.1,
           "time_delta": 0.0015, "time_verdict": "pass", "verdict": "pass"}
    folder = tmp_path / "perf_results" / "s1"
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps({
        "schema_version": 1, "hardware": HARDWARE, "started_at": "2026-02-01T10:00:00Z",
        "environment": {"torch": "2.12.0"}, "cases": {"1n1g_amp_b256_ttt": row}}))
    done = run_tool("publish", tmp_path / "perf_results", "--output", tmp_path / "site")
    assert done.returncode == 0, done.stderr
    [series] = site_data(tmp_path / "site")["series"]
    time, top1 = series["measures"][:2]
    assert top1["band_is_absolute"] is True and "band_is_absolute" not in time
    figures = series["points"][0]["measures"]["top-1"]
    assert (figures["baseline"], figures["tolerance"]) == (pytest.approx(76.5), pytest.approx(5))
    if shutil.which("node") is None:
        pytest.skip("drawing the band needs node")
    page = REPO_ROOT / "tools" / "history" / "site" / "page"
    script = (
        "globalThis.window = globalThis; window.RN50_HISTORY = {series: [], sessions: []};"
        f"require({json.dumps(str(page / 'common.js'))});"
        f"require({json.dumps(str(page / 'series.js'))});"
        f"const [top1, time, figures] = {json.dumps([top1, time, figures])};"
        "console.log(JSON.stringify([[-1, 1].map((sign) => RN50.bandEdge(top1, figures.baseline,"
        " figures.tolerance, sign)), RN50.bandEdge(time, 100, 0.1, 1),"
        " RN50.band(figures.tolerance, top1)]));")
    done = subprocess.run(["node", "-e", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    edges, relative, text = json.loads(done.stdout)
    assert edges == [pytest.approx(71.5), pytest.approx(81.5)]
    assert relative == pytest.approx(110.0) and text == "±5.00 %"


def test_a_memory_regression_is_red_on_the_memory_chart_and_not_on_the_speeds(published,
                                                                            generated):
    """The generated image upgrade grows peak memory 12% (tolerance 10%) and costs the speed
    less than its band: the case is a regression, its memory point one, its throughput point
    a pass (the speed's own verdict, throughput_verdict); the memory series has its band."""
    data = site_data(published[1])
    inputs = inputs_of(generated)
    series = next(one for one in data["series"] if one["case_id"] == "1n1g_amp_b256")
    assert [measure["slug"] for measure in series["measures"]] == ["throughput", "peak-memory"]
    assert series["measures"][1] == {"slug": "peak-memory", "title": "peak memory", "unit": "B",
                                     "lower_is_better": True, "gated": True}
    rows = [document["cases"]["1n1g_amp_b256"] for document in inputs.values()
            if "candidate" not in document]
    memory_only = [(point, row) for point, row in zip(series["points"], rows)
                   if row.get("memory_regression") and row["throughput_verdict"] == "pass"]
    assert memory_only
    for point, row in memory_only:
        memory = point["measures"]["peak-memory"]
        assert (point["verdict"], point["measure_verdict"], memory["verdict"]) == (
            "regression", "pass", "regression")
        assert memory["value"] == row["peak_memory_bytes"]
        assert memory["runs"] == row["runs_peak_memory_bytes"]
        assert (memory["baseline"], memory["tolerance"]) == (PEAK_MEMORY["amp"], 0.1)
    first = series["points"][0]
    assert first["measures"]["peak-memory"]["verdict"] == "pass"
    assert "measure_verdict" not in first


def test_an_auto_entry_shows_the_band_it_judged_with_and_its_lineage_each_measure(published,
                                                                                   generated):
    """The entry stores `auto`; the sessions judged against it (baseline_ips its median) used a
    5% band, for the reason their rows give: the latest one's is the entry's `band`. Its
    lineage items keep their figures by measure."""
    data = site_data(published[1])
    series = next(one for one in data["series"] if one["case_id"] == "1n1g_amp_b256")
    (entry,) = series["baselines"]
    names = [data["sessions"][point["session"]]["name"] for point in series["points"]]
    last = inputs_of(generated)[names[-1]]["cases"]["1n1g_amp_b256"]
    assert entry["tolerance"] == "auto"
    assert entry["band"] == {"tolerance": 0.05, "reason": last["tolerance_reason"],
                             "session": series["points"][-1]["session"]}
    assert entry["figures"] == {"throughput": 6100.0, "peak-memory": PEAK_MEMORY["amp"]}
    assert [old["figures"] for old in entry["lineage"]] == [
        {"throughput": 6300.0, "peak-memory": 36 * 2**30}, {"throughput": 6150.0}]


def test_a_measure_added_to_the_table_is_a_series_without_site_code(tmp_path, monkeypatch):
    """A measure the table gains (perf_tests/results/measures.py) is drawn as one of the case's
    series, with its own verdict, without a line of the site's code naming it."""
    from perf_tests.core.cases import THROUGHPUT
    from perf_tests.results.measures import MEASURES, Measure, own_verdict
    from tools.history.site.pages import SiteBuilder
    from tools.history.site.sources import read_sources

    loss = Measure("final-loss", "final loss", "nats", "final_loss", False, True,
                   own_verdict("loss_verdict"), runs_key="runs_final_loss",
                   baseline_key="baseline_final_loss", tolerance_key="loss_tolerance")
    monkeypatch.setitem(MEASURES, THROUGHPUT, (*MEASURES[THROUGHPUT], loss))
    folder = tmp_path / "perf_results"
    write_sessions(folder, 3, cases=1, ab_every=0)
    for number, path in enumerate(sorted(folder.glob("*/results.json"))):
        document = json.loads(path.read_text())
        document["cases"]["1n1g_amp_b256"].update(
            final_loss=2.5 + number, runs_final_loss=[2.5 + number] * 3, baseline_final_loss=2.5,
            loss_tolerance=0.1, loss_verdict="regression" if number else "pass")
        path.write_text(json.dumps(document))
    (series,) = SiteBuilder(read_sources([folder])).data(built_at="now")["series"]
    assert series["measures"][-1] == {"slug": "final-loss", "title": "final loss",
                                      "unit": "nats", "lower_is_better": True, "gated": True}
    assert [point["measures"]["final-loss"] for point in series["points"]] == [
        {"value": 2.5 + number, "runs": [2.5 + number] * 3, "baseline": 2.5, "tolerance": 0.1,
         "verdict": "regression" if number else "pass"} for number in range(3)]
