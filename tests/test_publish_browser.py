"""The history site in a real browser: Debian's headless Chromium, driven by selenium through
Debian's chromedriver (.ci/install-launchers.sh installs both; nothing is downloaded), opens a site
built from generated sessions (tools/history/site/generated.py) and the tiny real session the
suite's tests share, and reads back what the input sessions hold: the series, each point, each
measure's chart coloured by its own verdict, an auto entry's band, the diff between two picked
points (against perf_tests.environment.differences), a permalink, the A/B page, a real session's
links. One browser serves every check. The screenshots stay in test-artifacts/history-site/ of the
checkout (index, a series with two points picked and their diff, a series' throughput and memory
charts, its baselines with an auto band, the A/B page). A host without Chromium skips these tests
with one line."""
import json
import re
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from conftest import READS_TINY_RECORDING, REPO_ROOT, run_tool
from perf_tests.environment.differences import environment_diff, explained, settings_diff
from perf_tests.results.measures import MEMORY
from test_publish import baseline_with_lineage, inputs_of, site_data
from tools.history.series import SETTING_KEYS
from tools.history.site.browser import (browser_problem, drawn, open_page, page_errors,
                                        start_browser, wait_until)
from tools.history.site.generated import HARDWARE, write_sessions

pytestmark = [READS_TINY_RECORDING]
ARTIFACTS = REPO_ROOT / "test-artifacts" / "history-site"
SESSIONS = 30
MULTI_DEVICE = f"{HARDWARE}/1n2g_amp_b256"


@pytest.fixture(scope="module")
def browser():
    problem = browser_problem()
    if problem:
        pytest.skip(f"the history site's browser test needs Chromium: {problem}")
    driver = start_browser(1280, 1100)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def site(tmp_path_factory, tiny_recording):
    """A site of 30 generated sessions of two cases (three of them A/B), the tiny real session
    and a baseline file whose entry has a lineage."""
    folder = tmp_path_factory.mktemp("browser-site")
    write_sessions(folder / "perf_results", SESSIONS, cases=2, ab_every=10)
    awkward = folder / "it's a \\ \"folder\""   # quotes and a backslash through data.js
    awkward.mkdir()
    baseline = baseline_with_lineage(awkward / f"{HARDWARE}.json")
    done = run_tool("publish", folder / "perf_results", tiny_recording.results_dir, baseline,
                    "--output", folder / "site")
    assert done.returncode == 0, done.stderr
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return folder


def view(driver, site: Path, hash_: str = "") -> None:
    open_page(driver, site / "site" / "index.html", hash_)
    assert page_errors(driver) == []


def screenshot(driver, name: str) -> None:
    driver.execute_script("window.scrollTo(0, 0)")   # a row clicked lower scrolled the page
    assert driver.save_screenshot(str(ARTIFACTS / name))


def test_the_index_lists_every_series_with_its_sessions(browser, site, tiny_recording):
    view(browser, site)
    rows = browser.execute_script(
        "return [...document.querySelectorAll('#series tbody tr')].map(row => "
        "[row.dataset.series, row.cells[3].textContent])")
    real = f"{tiny_recording.results['hardware']}/1n1g_fp32_b2"
    assert browser.execute_script("return RN50.data.baseline_files") == [
        str(next((site / "site").parent.glob("it's*")) / f"{HARDWARE}.json")]
    assert rows == sorted([[f"{HARDWARE}/1n1g_amp_b256", str(SESSIONS - 3)],
                           [MULTI_DEVICE, str(SESSIONS - 3)], [real, "1"]])
    steps = browser.find_elements("css selector", "#steps li")
    assert len(steps) == len([step for series in site_data(site / "site")["series"]
                              for step in series["steps"]]) > 0
    screenshot(browser, "index.png")
    select = browser.find_element("id", "filter-hardware")
    select.find_element("css selector", f'option[value="{HARDWARE}"]').click()
    wait_until(browser, lambda driver: "hardware=" in driver.current_url, "filter")
    wait_until(browser, lambda driver: len(driver.find_elements(
        "css selector", "#series tbody tr")) == 2, "filter its series")
    image = next(document["environment"]["image"] for document in
                 reversed(inputs_of(site / "perf_results").values()))
    newer = [document for document in inputs_of(site / "perf_results").values()
             if document["environment"]["image"] == image and "candidate" not in document]
    browser.find_element("id", "filter-image").find_element(
        "css selector", f'option[value="{image}"]').click()
    counts = wait_until(browser, lambda driver: driver.execute_script(
        "return location.hash.includes('image=') && [...document.querySelectorAll("
        "'#series tbody tr')].map(row => row.cells[3].textContent)"), "filter by image")
    assert counts == [str(len(newer))] * 2


def test_a_series_draws_each_sessions_runs_and_median(browser, site):
    view(browser, site, f"#view=case&series={MULTI_DEVICE}")
    traces = browser.execute_script(
        "return document.getElementById('chart').data.map(t => [t.name, t.x, t.y])")
    medians = {(x, y) for name, xs, ys in traces if (name or "").startswith("median, ")
               for x, y in zip(xs, ys)}
    runs = next(ys for name, _, ys in traces if name == "one run")
    inputs = [document for document in inputs_of(site / "perf_results").values()
              if "candidate" not in document]
    rows = [document["cases"]["1n2g_amp_b256"] for document in inputs]
    assert medians == {(document["started_at"].replace("T", " ").rstrip("Z"),
                        round(row["median_ips"], 3)) for document, row in zip(inputs, rows)}
    assert sorted(runs) == sorted(value for row in rows for value in row["runs_ips"])
    table = browser.find_elements("css selector", "#points tbody tr")
    assert len(table) == len(rows)
    # Past RUN_DOTS runs, each session's runs are a whisker from its slowest to its fastest.
    whiskers = browser.execute_script(
        f"RN50.RUN_DOTS = 10; RN50.drawChart(RN50.data.series.find(s => s.id === "
        f"'{MULTI_DEVICE}'), {{}}); return document.getElementById('chart').data.filter("
        "t => t.error_y).flatMap(t => t.y.map((y, i) => [t.x[i], y - t.error_y.arrayminus[i], "
        "y + t.error_y.array[i]]))")
    assert not any(name == "one run" for name, _, _ in browser.execute_script(
        "return document.getElementById('chart').data.map(t => [t.name, 0, 0])"))
    assert sorted((x, round(low, 3), round(high, 3)) for x, low, high in whiskers) == sorted(
        (document["started_at"].replace("T", " ").rstrip("Z"), min(row["runs_ips"]),
         max(row["runs_ips"])) for document, row in zip(inputs, rows))
    busbw = chart_medians(browser, "chart-busbw")
    assert busbw == {(document["started_at"].replace("T", " ").rstrip("Z"),
                      (round(row["busbw_gbps"], 3), "#555555"))
                     for document, row in zip(inputs, rows)}
    last = [name for name, document in inputs_of(site / "perf_results").items()
            if "candidate" not in document][-1]
    pick(browser, last)
    panel = browser.find_element("id", "point").text
    drift = rows[-1]["drift"]
    assert ("tolerance 5.0% (auto: 3 standard errors of the medians' difference, 0.5%; the "
            "baseline's 10 runs scatter 0.4%)") in panel
    assert (f"drift\n{100 * drift['delta']:+.1f}% since 2026-01-01T00:00:00Z across 2 "
            f"refreshes ({drift['changed']})") in panel


def chart_medians(driver, chart: str) -> dict:
    """A chart's medians: {x: (y, colour)}, as its 'median, <verdict>' traces draw them."""
    traces = driver.execute_script(
        f"return document.getElementById('{chart}').data.map(t => [t.name, t.x, t.y, "
        "t.marker && t.marker.color])")
    return {(x, (y, colour)) for name, xs, ys, colour in traces
            if (name or "").startswith("median, ") for x, y in zip(xs, ys)}


def test_a_memory_regression_is_red_on_its_own_chart_and_an_auto_band_is_a_number(browser,
                                                                                  site):
    """After the generated image upgrade the peak memory grows 12% (band 10%) while the speed
    stays within its band: on the memory chart those sessions are red, on the throughput chart
    green (the speed's own verdict). The baseline entry's band is auto: the table gives the band
    the sessions judged against it used, with its reason."""
    series = f"{HARDWARE}/1n1g_amp_b256"
    view(browser, site, f"#view=case&series={series}")
    wait_until(browser, lambda driver: driver.execute_script(
        f"return !!document.getElementById('chart-{MEMORY.slug}').data"), "draw the memory chart")
    inputs = [document for document in inputs_of(site / "perf_results").values()
              if "candidate" not in document]
    when = {document["started_at"].replace("T", " ").rstrip("Z"): document["cases"][
        "1n1g_amp_b256"] for document in inputs}
    speed, memory = chart_medians(browser, "chart"), chart_medians(browser, f"chart-{MEMORY.slug}")
    red, green = "#d62728", "#2ca02c"
    memory_only = [x for x, row in when.items()
                   if row.get("memory_regression") and row["throughput_verdict"] == "pass"]
    assert memory_only
    for x in memory_only:
        assert (x, (round(when[x]["median_ips"], 3), green)) in speed
        assert (x, (when[x]["peak_memory_bytes"] / 2**30, red)) in memory
    assert {colour for x, (_, colour) in memory if not when[x].get("memory_regression")} == {
        green}
    screenshot(browser, "memory-series.png")
    band = browser.find_element("css selector", "#baselines tbody tr td.band").text
    reason = next(iter(when.values()))["tolerance_reason"].removeprefix("auto: ")
    assert band == f"auto (±5.0%: {reason})"
    assert "NaN" not in browser.find_element("id", "baselines").text
    browser.execute_script("document.getElementById('baselines').scrollIntoView(); "
                           "window.scrollBy(0, -60)")   # its heading too
    assert browser.save_screenshot(str(ARTIFACTS / "auto-band.png"))


def pick(driver, name: str) -> None:
    driver.find_element("css selector", f'#points tr[data-session="{name}"]').click()


def expected_diff(site: Path, before: str, after: str, case_id: str = "1n2g_amp_b256") -> str:
    """What changed from one session to the other, as perf_tests.environment.differences words it.
    """
    inputs = inputs_of(site / "perf_results")
    settings = settings_diff(inputs[before]["cases"][case_id]["settings"],
                             inputs[after]["cases"][case_id]["settings"], SETTING_KEYS)
    return explained("", environment_diff(inputs[before]["environment"],
                                          inputs[after]["environment"]),
                     settings).removeprefix("; ")


def test_two_picked_points_show_the_gates_diff_and_a_permalink_keeps_it(browser, site):
    """Before the torch upgrade, after the image's (image, driver, NCCL, torch, commit
    changed); then, through a permalink, across the NCCL_ALGO variable and a threads
    setting."""
    names = sorted(inputs_of(site / "perf_results"))
    before, after = names[5], names[22]
    view(browser, site, f"#view=case&series={MULTI_DEVICE}")
    pick(browser, before)
    pick(browser, after)
    text = wait_until(browser, lambda driver: driver.find_element("id", "pair").text
                      if driver.find_elements("id", "pair-diff") else None, "show a diff")
    diff = browser.find_element("id", "pair-diff").text
    assert diff == expected_diff(site, before, after)
    assert diff.startswith("environment: image nvcr.io/nvidia/pytorch:26.09-py3 [docker: "
                           "sha256:5f1e] -> nvcr.io/nvidia/pytorch:26.11-py3"), diff
    assert f"A: {before}" in text and f"B: {after}" in text
    screenshot(browser, "series-diff.png")
    permalink = browser.find_element("id", "permalink").get_attribute("href")
    assert f"a={before}" in permalink and f"b={after}" in permalink
    browser.get("about:blank")
    browser.get(permalink)
    wait_until(browser, drawn, "draw the permalink's view")
    assert browser.find_element("id", "pair-diff").text == diff
    picked = [row.get_attribute("data-session") for row in
              browser.find_elements("css selector", "#points tr.picked")]
    assert sorted(picked) == sorted([before, after])
    variable_before, variable_after = names[24], names[27]
    view(browser, site, f"#view=case&series={MULTI_DEVICE}&a={variable_before}"
         f"&b={variable_after}")
    assert browser.find_element("id", "pair-diff").text == \
        expected_diff(site, variable_before, variable_after) == \
        "environment: NCCL_ALGO unset -> Ring; settings: threads 16 -> 12"


def test_the_ab_page_shows_each_cases_ratio_and_what_differs(browser, site):
    inputs = inputs_of(site / "perf_results")
    name = next(name for name, document in inputs.items() if "candidate" in document)
    view(browser, site, f"#view=ab&session={name}")
    cells = browser.execute_script(
        "return [...document.querySelectorAll('#ab tbody tr')].map(row => "
        "[...row.cells].map(cell => cell.textContent))")
    rows = inputs[name]["cases"]
    assert [cell[0] for cell in cells] == list(rows)
    for cell, row in zip(cells, rows.values()):
        assert cell[1] == str(row["pairs"]) and cell[4] == f"{row['ratio']:.3f}"
        assert cell[8] == row["verdict"] and cell[9] == row["environment_diff"]
    screenshot(browser, "ab.png")


def test_a_real_sessions_point_links_its_report_and_runs(browser, site, tiny_recording):
    hardware = tiny_recording.results["hardware"]
    row = tiny_recording.cases["1n1g_fp32_b2"]
    view(browser, site, f"#view=case&series={hardware}/1n1g_fp32_b2")
    pick(browser, "results")
    panel = wait_until(browser, lambda driver: driver.find_element("id", "point").text
                       if "results" in driver.find_element("id", "point").text else None,
                       "show the point")
    # The site keeps 3 decimals (pages.DECIMALS) and the page shows 2 as JavaScript's toFixed
    # rounds the binary number: 12.2954 kept as 12.295 shows 12.29, 0.0054 off.
    shown = re.search(r"([\d.]+) img/s \((\d+) runs", panel)
    assert shown, panel
    assert float(shown[1]) == pytest.approx(row["median_ips"], abs=0.0056)
    assert int(shown[2]) == len(row["runs_ips"])
    links = [link.get_attribute("href") for link in
             browser.find_elements("css selector", "#point a")]
    names = [Path(unquote(urlparse(link).path)).name for link in links]
    records = sorted(path.name for path in
                     (tiny_recording.results_dir / "1n1g_fp32_b2").glob("run-*.json"))
    assert names[0] == "report.md" and sorted(names[1:]) == records
    for link in links:
        copied = Path(unquote(urlparse(link).path))
        assert copied.is_file() and str(copied).startswith(str(site / "site"))
    first_run = json.loads(Path(unquote(urlparse(links[1]).path)).read_text())
    assert first_run["case_id"] == "1n1g_fp32_b2"
