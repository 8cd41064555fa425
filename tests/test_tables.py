"""The terminal and report.md tables say what decided a verdict, show no spread for one run,
name the spread one way, say what the runs could have detected and the band each judged case was
judged with, and keep a long skip reason from stretching the terminal's table."""
from perf_tests.report.tables import TABLE_COLUMNS, markdown_table, table_rows, throughput_table

# The report's case: a quiet rerun above a junk baseline's throughput, failed on the speedup.
ON_SPEEDUP = {"nodes": 1, "gpus_per_node": 2, "batch_per_device": 8, "precision": "fp32",
              "runs_ips": [60.0, 61.0, 62.0], "median_ips": 61.0, "cv": 0.016, "speedup": 0.84,
              "efficiency": 0.42, "baseline_ips": 40.3, "delta": 0.515,
              "speedup_delta": -0.885, "min_detectable_slowdown": 0.1234,
              "verdict": "regression"}
ONE_RUN = {"nodes": 1, "gpus_per_node": 1, "batch_per_device": 8, "precision": "fp32",
           "runs_ips": [30.0], "median_ips": 30.0, "cv": 0.0, "speedup": 1.0,
           "verdict": "no-baseline"}
SKIPPED = {"nodes": 2, "gpus_per_node": 1, "batch_per_device": 8, "precision": "fp32",
           "runs_ips": [], "verdict": "skipped",
           "skip_reason": "multi-node needs a multi-node launcher: pass --perf-launcher slurm "
                          "inside an allocation, --perf-launcher mpirun with --perf-hostfile, or "
                          "simulated"}
CASES = {"1n2g_fp32_b8": ON_SPEEDUP, "1n1g_fp32_b8": ONE_RUN, "2n1g_fp32_b8": SKIPPED}


def test_a_verdict_the_speedup_decided_says_so_beside_the_throughputs_delta():
    row = dict(zip(TABLE_COLUMNS, next(r for r in table_rows(CASES) if r[0] == "1n2g_fp32_b8")))
    assert (row["delta"], row["verdict"]) == ("+51.5%", "regression (speedup -88.5%)")
    assert "| +51.5% | 12% | regression (speedup -88.5%) |" in markdown_table(CASES)


def test_one_run_shows_no_spread_and_both_tables_name_it_spread():
    row = dict(zip(TABLE_COLUMNS, next(r for r in table_rows(CASES) if r[0] == "1n1g_fp32_b8")))
    assert row["spread"] == "-" and row["runs"] == "1"
    header = markdown_table(CASES).splitlines()[0]
    assert "| spread |" in header and "| cv |" not in header
    assert "| 30.00 | - | 1.00 |" in markdown_table(CASES)


def test_a_long_skip_reason_goes_under_the_terminal_table_not_into_its_rows():
    lines = throughput_table(CASES)
    assert max(len(line) for line in lines[:5]) <= 110, "\n".join(lines)
    assert lines[4].startswith("2n1g_fp32_b8") and lines[4].endswith("skipped")
    assert lines[5] == f"2n1g_fp32_b8 skipped: {SKIPPED['skip_reason']}"


def test_both_tables_say_what_the_runs_could_have_detected():
    detects = {row[0]: dict(zip(TABLE_COLUMNS, row))["detects"] for row in table_rows(CASES)}
    assert detects == {"1n2g_fp32_b8": "12%", "1n1g_fp32_b8": "-", "2n1g_fp32_b8": "-"}
    undetectable = {"1n2g_fp32_b8": {**ON_SPEEDUP, "min_detectable_slowdown": None}}
    assert dict(zip(TABLE_COLUMNS, table_rows(undetectable)[0]))["detects"] == ">90%"
    assert max(len(line) for line in throughput_table(undetectable)[:3]) <= 110
    assert "| detects |" in markdown_table(CASES).splitlines()[0]
    # Rows that state no figure (extracted logs, files from before it) leave the column out.
    assert "detects" not in markdown_table({"1n1g_fp32_b8": ONE_RUN})


def test_a_judged_case_says_its_band_under_the_terminal_table_whatever_its_verdict():
    reason = ("auto: 12 earlier sessions on this stack, the 2nd slowest 18.3% below the "
              "baseline, plus 3 standard errors of the medians' difference, 3.9%")
    passed = {**ON_SPEEDUP, "verdict": "pass", "speedup_delta": None, "tolerance": 0.222,
              "tolerance_reason": reason}
    lines = throughput_table({**CASES, "1n2g_fp32_b8": passed})
    assert lines[5] == f"1n2g_fp32_b8 judged with tolerance 22% ({reason})"
    # Unjudged cases (no baseline, skipped) state none; a number given states only itself.
    assert [line for line in lines if "tolerance" in line] == [lines[5]]
    given = throughput_table({"1n2g_fp32_b8": {**passed, "tolerance": 0.03,
                                               "tolerance_reason": None}})
    assert given[3] == "1n2g_fp32_b8 judged with tolerance 3%"
