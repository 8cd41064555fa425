"""The interconnect through real sessions on this host: the simulated launcher's two-node case
scales against the session's 1n1g, every multi-device row carries its bus bandwidth (the
workers' own all-reduce probe after the timed window), report.md breaks each scaling loss down,
and --perf-collectives gates the probe alone against the entries' busbw_gbps. (Across two
hosts, with the link throttled: tests/test_two_hosts.py.)"""
import json

import pytest

from conftest import TINY_CASE_ARGS

pytestmark = pytest.mark.slow

SCALING = ["--perf-launcher", "simulated", "-k", "1n1g or 1n2g or 2n1g", "--perf-batches", "2",
           *TINY_CASE_ARGS, "--perf-set", "interconnect-iters=2", "--perf-explain", "never"]
ONE_RUN = ["--perf-runs", "1", "--perf-set", "max-runs=1"]
# The tests that read the session below: one worker runs them (make test's --dist loadgroup).
READS_SCALING = pytest.mark.xdist_group("interconnect-sessions-scaling")


@pytest.fixture(scope="module")
def scaling(shared_suite):
    """One run of each scaling case through the simulated launcher."""
    return shared_suite(*SCALING, *ONE_RUN)


@READS_SCALING
def test_simulated_two_node_case_runs_and_scales_against_this_sessions_1n1g(scaling):
    run = scaling
    assert run.outcome.ret == 0, run.output
    single, double = run.cases["1n1g_fp32_b2"], run.cases["2n1g_fp32_b2"]
    assert double["verdict"] == "no-baseline" and double["nodes"] == 2
    assert double["speedup"] == pytest.approx(double["median_ips"] / single["median_ips"])
    assert double["efficiency"] == pytest.approx(double["speedup"] / 2)
    record = json.loads((run.results_dir / "2n1g_fp32_b2" / "run-1.json").read_text())
    assert record["record"]["nodes"] == 2 and record["record"]["world_size"] == 2
    # One agent per simulated node, the suite's, each started with its node's rank.
    assert [command[command.index("--node-rank") + 1] for command in record["commands"]] == [
        "0", "1"], record["commands"]
    assert all("perf_tests.runs.agent" in command for command in record["commands"])


@READS_SCALING
def test_every_multi_device_row_carries_its_bus_bandwidth(scaling):
    run = scaling
    assert run.outcome.ret == 0, run.output
    multi = {case_id: row for case_id, row in run.cases.items() if case_id != "1n1g_fp32_b2"}
    assert set(multi) == {"1n2g_fp32_b2", "2n1g_fp32_b2"}, run.cases.keys()
    for case_id, row in multi.items():
        assert row["busbw_gbps"] > 0 and row["gradient_allreduce_s"] > 0, row
        assert row["runs_busbw_gbps"] == [row["busbw_gbps"]]
        record = json.loads((run.results_dir / case_id / "run-1.json").read_text())["record"]
        probe = record["interconnect"]
        assert (probe["backend"], probe["ranks"], probe["iters"]) == ("gloo", 2, 2)
        assert [message["name"] for message in probe["messages"]] == ["ddp-bucket", "gradient"]
        assert probe["messages"][1]["bytes"] == 25_557_032 * 4
    single = run.cases["1n1g_fp32_b2"]
    assert "busbw_gbps" not in single
    record = json.loads((run.results_dir / "1n1g_fp32_b2" / "run-1.json").read_text())["record"]
    assert record["interconnect"] == {"skipped": "one rank: nothing to all-reduce"}
    table = run.output[run.output.index("ResNet50 training throughput"):]
    assert "  busbw  " in table.splitlines()[1]
    report = (run.results_dir / "report.md").read_text()
    assert "| busbw GB/s |" in report and "### Scaling loss" in report
    breakdown = report.split("### Scaling loss")[1]
    assert "| 1n2g_fp32_b2 | 2 |" in breakdown and "| 2n1g_fp32_b2 | 2 |" in breakdown


def entry(median_ips: float, busbw: float | None = None) -> dict:
    fields = {"median_ips": median_ips, "runs_ips": [median_ips] * 3,
              "settings": {"device_type": "cpu"}}
    return {**fields, "busbw_gbps": busbw} if busbw is not None else fields


def test_collectives_gates_the_probe_alone_against_the_entries_busbw(run_suite):
    # Far above and far below what any run here measures (about 1 GB/s on loopback): one
    # probe a case decides.
    baseline = {"entries": {
        "1n1g_fp32_b2": entry(7.0), "2n1g_fp32_b2": entry(6.0, busbw=500.0),
        "1n2g_fp32_b2": entry(6.0, busbw=0.001)}}
    run = run_suite(*SCALING, "--perf-collectives", *ONE_RUN, baseline=baseline)
    assert run.outcome.ret == 1, run.output
    assert json.loads(run.baseline_file.read_text()) == baseline   # never written
    rows = run.cases
    assert {row["kind"] for row in rows.values()} == {"collectives"}
    assert rows["1n1g_fp32_b2"]["verdict"] == "skipped"
    assert "one device: no interconnect to probe" in rows["1n1g_fp32_b2"]["skip_reason"]
    slower = rows["2n1g_fp32_b2"]
    assert slower["verdict"] == "regression" and len(slower["runs_busbw_gbps"]) == 1
    assert slower["message"].startswith(f"2n1g_fp32_b2: busbw {slower['busbw_gbps']:.3g} GB/s, ")
    assert "against the baseline 500 GB/s" in slower["message"]
    assert rows["1n2g_fp32_b2"]["verdict"] == "improvement"
    # No training ran: the records hold the probe, not img/s.
    record = json.loads((run.results_dir / "2n1g_fp32_b2" / "run-1.json").read_text())["record"]
    assert record["mode"] == "interconnect" and "global_ips" not in record
    assert "Interconnect (all-reduce probe, no training)" in run.output
    assert "2n1g_fp32_b2 probe 1: busbw " in run.output
    report = (run.results_dir / "report.md").read_text()
    assert "## Interconnect (all-reduce probe, no training)" in report


@pytest.mark.parametrize("args, words", [
    (["--perf-update-baselines"], "--perf-update-baselines with --perf-collectives: the probe "
     "alone is judged against the busbw_gbps the throughput entries store"),
    (["--perf-find-max-batch"], "--perf-find-max-batch with --perf-collectives"),
    (["--perf-set", "interconnect-iters=0"], "--perf-collectives with --perf-set "
     "interconnect-iters=0 probes nothing; give 1 or more (default 5)"),
])
def test_collectives_with_what_it_cannot_do_is_a_one_line_usage_error(run_suite, args, words):
    run = run_suite("-k", "2n1g_fp32", *TINY_CASE_ARGS, "--perf-collectives", *args)
    assert run.outcome.ret == 4, run.output
    assert words in run.output and "Traceback" not in run.output
