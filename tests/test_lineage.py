"""A baseline entry's lineage (perf_tests/baselines/lineage.py): kept by every write of an entry,
read back, and the drift a gate finds against it."""
import json
from datetime import datetime, timezone

import pytest

from perf_tests.baselines.file import (BaselineError, load_baseline_file, record_host_shifts,
                                       update_baseline_file)
from perf_tests.baselines.host_shift import measured_shift
from perf_tests.baselines.lineage import LINEAGE_LENGTH, drift, lineage_text, merged_changes
from perf_tests.results.measures import measures_of

NOW = datetime(2026, 11, 28, tzinfo=timezone.utc)


def entry(median, day, torch, image="a", **more):
    return {"median_ips": median, "runs_ips": [median] * 3, "tolerance": "auto",
            "recorded_at": f"2026-11-{day:02d}T10:00:00Z",
            "environment": {"torch": torch, "image": image}, "settings": {"image_size": 224},
            **more}


def refreshed(path, *entries):
    """Each entry written over the last, as three refreshes do."""
    for each in entries:
        update_baseline_file(path, "nvidia-h200", {"1n1g_amp_b256": each})
    return json.loads(path.read_text())["entries"]["1n1g_amp_b256"]


def test_three_refreshes_of_three_percent_each_are_a_drift_the_current_band_hides(tmp_path):
    current = refreshed(tmp_path / "b.json", entry(100.0, 20, "2.11.0"),
                        entry(97.0, 22, "2.12.0"), entry(94.1, 24, "2.12.0", image="b"),
                        entry(91.3, 26, "2.13.0", image="c"))
    assert [item["median_ips"] for item in current["lineage"]] == [100.0, 97.0, 94.1]
    assert [item["changed"] for item in current["lineage"]] == [
        "torch 2.11.0 -> 2.12.0", "image a -> b", "image b -> c, torch 2.12.0 -> 2.13.0"]
    # The gate's median is within a 1% band of the current entry, 9% below the first one.
    found = drift(91.0, load_baseline_file(tmp_path / "b.json").entry(
        "1n1g_amp_b256").lineage, 0.01, 90, NOW)
    assert found.text == ("-9.0% since 2026-11-20 across 3 refreshes: torch 2.11.0 -> 2.13.0, "
                          "image a -> c")
    assert found.to_dict()["median_ips"] == 100.0
    # Within the band of every earlier entry, or beyond the window: nothing to say.
    assert drift(99.5, current["lineage"], 0.01, 90, NOW) is None
    assert drift(91.0, current["lineage"], 0.01, 3, NOW) is None
    assert drift(91.0, current["lineage"], 0.10, 90, NOW) is None


def test_the_lineage_keeps_its_last_entries_and_starts_anew_under_other_settings(tmp_path):
    path = tmp_path / "b.json"
    kept = refreshed(path, *(entry(100.0 - i, 1 + i, "2.11.0") for i in range(LINEAGE_LENGTH + 3)))
    assert len(kept["lineage"]) == LINEAGE_LENGTH
    assert kept["lineage"][-1]["median_ips"] == 100.0 - LINEAGE_LENGTH - 1
    other = entry(50.0, 28, "2.11.0")
    other["settings"] = {"image_size": 128}   # not comparable: a lineage of its own
    assert "lineage" not in refreshed(path, other)


def test_a_lineage_item_keeps_each_measure_of_the_entry_it_stands_for(tmp_path):
    """Every measure the table reads from an entry (perf_tests/results/measures.py) is in the
    lineage item that entry becomes: peak memory and what it spans, energy, bus bandwidth, and a
    measure no code names yet; an old file whose items keep none of them still reads."""
    path = tmp_path / "b.json"
    figures = {"speedup": 1.0, "peak_memory_bytes": 21_474_836_480, "joules_per_image": 0.21,
               "busbw_gbps": 380.5, "gradient_allreduce_s": 0.0041, "new_measure": 7.5}
    first = entry(100.0, 20, "2.11.0", peak_memory_covers="timed window (after warm-up)",
                  **figures)
    (item,) = refreshed(path, first, entry(99.0, 22, "2.12.0"))["lineage"]
    assert {name: item.get(name) for name in figures} == figures
    assert item["peak_memory_covers"] == "timed window (after warm-up)"
    assert item["tolerance"] == "auto" and item["runs"] == 3
    kept = {value.measure.key for value in measures_of("1n8g_amp_b256", item)}
    assert kept == {"median_ips", "speedup", "peak_memory_bytes", "joules_per_image",
                    "busbw_gbps"}
    old = json.loads(path.read_text())
    old["entries"]["1n1g_amp_b256"]["lineage"] = [{"median_ips": 100.0, "runs": 3}]
    path.write_text(json.dumps(old))
    assert load_baseline_file(path).entry("1n1g_amp_b256").lineage == [
        {"median_ips": 100.0, "runs": 3}]


def test_a_measured_host_shift_is_kept_without_a_lineage_item_and_outlives_a_refresh(tmp_path):
    """rn50-perf calibrate's host shift (perf_tests/baselines/host_shift.py): kept in the entry it
    was measured against and nowhere else, no refresh of its own; a refresh keeps it (it is the
    host's); a bad one is refused in one line naming the entry."""
    path = tmp_path / "b.json"
    refreshed(path, entry(100.0, 20, "2.11.0"))
    shift = measured_shift(100.0, [120.0, 96.0])
    assert shift["fraction"] == 0.25 and shift["sessions"] == 2
    assert record_host_shifts(path, {"1n1g_amp_b256": shift, "1n8g_amp_b256": shift}) == [
        "1n8g_amp_b256"]
    stored = json.loads(path.read_text())["entries"]
    assert list(stored) == ["1n1g_amp_b256"] and "lineage" not in stored["1n1g_amp_b256"]
    assert load_baseline_file(path).entry("1n1g_amp_b256").host_shift == shift
    assert refreshed(path, entry(97.0, 22, "2.12.0"))["host_shift"] == shift
    bad = json.loads(path.read_text())
    bad["entries"]["1n1g_amp_b256"]["host_shift"] = {"fraction": 1.5, "sessions": 2}
    path.write_text(json.dumps(bad))
    with pytest.raises(BaselineError, match="entry 1n1g_amp_b256 has a host_shift that has no "
                                            "fraction between 0 and 1 .measure it again"):
        load_baseline_file(path)


def test_a_refresh_prints_the_lineage_it_extends():
    old = entry(97.0, 22, "2.12.0", lineage=[{"median_ips": 100.0,
                                              "recorded_at": "2026-11-20T10:00:00Z"}])
    assert lineage_text(old, 94.1) == "100.0 (2026-11-20) -> 97.0 (2026-11-22) -> 94.1 img/s"
    assert lineage_text(None, 94.1) == ""


def test_changes_across_refreshes_merge_and_cancel():
    assert merged_changes(["torch 2.11 -> 2.12, driver 550 -> 560", "torch 2.12 -> 2.13",
                           "driver 560 -> 550"]) == "torch 2.11 -> 2.13"
    assert merged_changes(["no change in device, driver", "no change in device"]) == \
        "no change recorded"


def test_a_drift_warns_by_default_fails_under_drift_fail_and_is_off_under_off(mode_context):
    from perf_tests.baselines.file import BaselineEntry
    from perf_tests.judging.tolerance_band import Band
    from perf_tests.modes.throughput import Throughput

    recent = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    entry = BaselineEntry("1n1g_fp32_b8", 91.3, lineage=[
        {"median_ips": 100.0, "recorded_at": recent, "changed": "torch 2.11.0 -> 2.13.0"}])
    line = "1n1g_fp32_b8: 91.0 img/s, -0.3% against the baseline 91.3 img/s (tolerance 1%)"
    for drift_action, verdict, ending in (
            ("warn", "pass", ""), ("fail", "regression", " (--perf-drift fail)")):
        details = {}
        judged = Throughput(mode_context(drift=drift_action)).with_drift(
            entry, 91.0, Band(0.01), details, line)
        assert judged == (verdict, f"{line}; but -9.0% since {recent[:10]} across 1 refresh: "
                                   f"torch 2.11.0 -> 2.13.0{ending}")
        assert details["drift"]["delta"] < -0.08
    assert Throughput(mode_context(drift="off")).with_drift(
        entry, 91.0, Band(0.01), {}, line) == ("pass", line)
