"""The interconnect probe (rn50_model/interconnect.py) in a real gloo process group, nccl-tests'
arithmetic, where a scaling loss went (perf_tests/judging/scaling_loss.py) and the
--perf-collectives gate's verdicts (perf_tests/modes/collectives.py)."""
import os
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from perf_tests.baselines.file import BaselineEntry
from perf_tests.judging.scaling_loss import (compute_clause, interconnect_clause, loss_causes,
                                             probe_skipped)
from perf_tests.modes.collectives import judge_busbw
from perf_tests.report.scaling import breakdown
from perf_tests.report.tables import TABLE_COLUMNS, table_rows, throughput_table
from rn50_model.interconnect import (DDP_BUCKET_BYTES, Message, bandwidths, bus_factor, messages_of,
                                     probe)
from rn50_model.model import resnet50

# -- nccl-tests' arithmetic -----------------------------------------------------------------


def test_bus_bandwidth_is_nccl_tests_all_reduce_factor():
    assert bus_factor(2) == 1.0 and bus_factor(4) == 1.5 and bus_factor(8) == 1.75
    figures = bandwidths(100 * 10**9, 2.0, ranks=8)   # 100 GB in 2 s over 8 ranks
    assert figures == {"algbw_gbps": 50.0, "busbw_gbps": 87.5}


def test_the_messages_are_a_ddp_bucket_and_the_whole_gradient_in_the_parameters_dtype():
    model = resnet50()
    bucket, gradient = messages_of(model)
    assert (bucket.name, bucket.nbytes, bucket.dtype) == ("ddp-bucket", DDP_BUCKET_BYTES,
                                                          torch.float32)
    # ResNet50 v1.5 has 25,557,032 parameters, four bytes each.
    assert (gradient.name, gradient.nbytes) == ("gradient", 25_557_032 * 4)
    assert gradient.elements == 25_557_032
    small = torch.nn.Linear(10, 10).to(torch.bfloat16)
    assert [message.nbytes for message in messages_of(small)] == [220, 220]


def test_without_a_process_group_the_probe_says_why_it_skipped():
    assert probe([Message("gradient", 1024, torch.float32)], torch.device("cpu"), 5,
                 lambda: None) == {"skipped": "one rank: nothing to all-reduce"}


def probing_rank(rank: int, world: int, port: int, iters: int, queue,
                 no_room_on: int | None) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        # A rank with no room for the gradient: a message far beyond any memory.
        gradient = (1 << 60) if rank == no_room_on else 8 << 20
        messages = [Message("ddp-bucket", 4 << 20, torch.float32),
                    Message("gradient", gradient, torch.float32)]
        queue.put((rank, probe(messages, torch.device("cpu"), iters, lambda: None)))
    finally:
        dist.destroy_process_group()


def probed(world: int, iters: int, no_room_on: int | None = None) -> dict[int, dict]:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    context = mp.get_context("spawn")
    queue = context.Queue()
    processes = [context.Process(target=probing_rank,
                                 args=(rank, world, port, iters, queue, no_room_on))
                 for rank in range(world)]
    for process in processes:
        process.start()
    results = dict(queue.get(timeout=120) for _ in processes)
    for process in processes:
        process.join(timeout=60)
    return results


@pytest.mark.slow
def test_a_real_gloo_probe_reports_every_message_the_same_on_every_rank():
    results = probed(world=2, iters=3)
    own = [results[rank].pop("probe_seconds") for rank in (0, 1)]   # each rank's own wall time
    assert results[0] == results[1], "every rank reports the ranks' average"
    figures = results[0]
    assert (figures["backend"], figures["ranks"], figures["iters"]) == ("gloo", 2, 3)
    bucket, gradient = figures["messages"]
    assert (bucket["name"], bucket["bytes"], bucket["dtype"]) == ("ddp-bucket", 4 << 20,
                                                                  "float32")
    for message in (bucket, gradient):
        assert message["seconds"] > 0
        assert message["slowest_rank_seconds"] >= message["seconds"]
        assert message["algbw_gbps"] == pytest.approx(message["bytes"] / message["seconds"]
                                                      / 1e9)
        assert message["busbw_gbps"] == message["algbw_gbps"]   # 2 (n - 1) / n = 1 for n = 2
    assert figures["busbw_gbps"] == gradient["busbw_gbps"]
    assert figures["gradient_allreduce_s"] == gradient["seconds"]
    assert min(own) > gradient["seconds"] * 3


@pytest.mark.slow
def test_a_rank_without_room_for_a_message_makes_every_rank_skip_rather_than_wait():
    results = probed(world=2, iters=2, no_room_on=1)
    assert results == {0: {"skipped": "out of memory for the gradient message (8 MB) on a rank"},
                       1: {"skipped": "out of memory for the gradient message "
                                      f"({(1 << 60) / 1e6:.0f} MB) on a rank"}}


@pytest.mark.slow
def test_a_probe_of_no_iterations_is_skipped_on_every_rank():
    assert probed(world=2, iters=0) == {rank: {"skipped": "interconnect_iters is 0"}
                                        for rank in (0, 1)}


# -- where a scaling loss went ------------------------------------------------------------

ENTRY = BaselineEntry("2n1g_fp32_b8", 30.0, busbw_gbps=1.55)
SINGLE = BaselineEntry("1n1g_fp32_b8", 20.0)


def test_a_throttled_link_is_named_and_unchanged_compute_says_so():
    row = {"runs_busbw_gbps": [0.11, 0.12, 0.10], "runs_ips": [9.0, 9.1, 8.9]}
    assert loss_causes(row, ENTRY, "1n1g_fp32_b8", 19.8, SINGLE, 0.1) == (
        "interconnect busbw 1.55 -> 0.11 GB/s (-93%); 1n1g compute unchanged (-1%)")


def test_slower_devices_are_named_and_an_unchanged_interconnect_says_so():
    row = {"runs_busbw_gbps": [1.5, 1.6, 1.52]}
    assert loss_causes(row, ENTRY, "1n1g_fp32_b8", 12.0, SINGLE, 0.1) == (
        "interconnect busbw unchanged (-2%); 1n1g compute 20 -> 12 img/s (-40%)")


def test_the_busbw_is_of_the_unmarked_runs_as_an_entry_is_made_of():
    row = {"runs_busbw_gbps": [0.1, 1.5, 1.6], "marked_runs": {"1": ["busy"]}}
    assert interconnect_clause(row, ENTRY, 0.1) == "interconnect busbw unchanged (+0%)"


def test_what_cannot_be_compared_says_why():
    assert interconnect_clause({}, ENTRY, 0.1) == "interconnect not probed"
    assert interconnect_clause({"interconnect_skipped": "interconnect_iters is 0"}, ENTRY,
                               0.1) == "interconnect not probed (interconnect_iters is 0)"
    old_entry = BaselineEntry("2n1g_fp32_b8", 30.0)
    assert interconnect_clause({"runs_busbw_gbps": [1.2]}, old_entry, 0.1) == (
        "interconnect busbw 1.2 GB/s, the baseline has none (recorded before the probe: "
        "refresh it with --perf-update-baselines)")
    assert compute_clause("1n1g_fp32_b8", None, SINGLE, 0.1) == (
        "1n1g compute not measured in this session (add -k 1n1g_fp32_b8)")
    assert compute_clause("1n1g_fp32_b8", 19.0, None, 0.1) == (
        "1n1g compute 19 img/s, 1n1g_fp32_b8 has no baseline entry")


def test_probe_skipped_names_the_reason_of_runs_that_made_none():
    assert probe_skipped([{"interconnect": {"skipped": "interconnect_iters is 0"}}]) == {
        "interconnect_skipped": "interconnect_iters is 0"}
    assert probe_skipped([{"interconnect": {"busbw_gbps": 1.0}}, {}]) == {}


def row_of(nodes, gpus, ips, **more):
    return {"kind": "throughput", "nodes": nodes, "gpus_per_node": gpus, "batch_per_device": 8,
            "precision": "fp32", "median_ips": ips, "runs_ips": [ips], "verdict": "pass",
            **more}


def test_the_breakdown_puts_the_gradient_all_reduce_against_the_time_each_step_lost():
    rows = {"1n1g_fp32_b8": row_of(1, 1, 20.0),
            "2n1g_fp32_b8": row_of(2, 1, 32.0, gradient_allreduce_s=0.05, busbw_gbps=2.0,
                                   op_profile={"communication_share": 0.12}),
            "1n2g_fp32_b8": row_of(1, 2, 20.0, gradient_allreduce_s=0.9),
            "1n2g_bf16_b8": {**row_of(1, 2, 50.0), "precision": "bf16"}}
    lines = breakdown(rows)
    assert lines[1] == "### Scaling loss"
    table = [line for line in lines if line.startswith("| ")]
    # 2n1g: a step per device 16/32 = 0.5 s against 8/20 = 0.4 s: 0.1 s lost, of which the
    # 0.05 s all-reduce explains about half. 1n2g: 0.8 s against 0.4 s, the all-reduce
    # longer than the loss: all of it. No 1n1g bf16 case: that row is left out.
    assert table[1:] == [
        "| 1n2g_fp32_b8 | 2 | 40.0 | 20.0 | 50% | 0.8 | 0.4 | 0.4 | 0.9 | ~100% | - |",
        "| 2n1g_fp32_b8 | 2 | 40.0 | 32.0 | 80% | 0.5 | 0.4 | 0.1 | 0.05 | ~50% | 12% |"]
    assert breakdown({"1n1g_fp32_b8": row_of(1, 1, 20.0)}) == []


def test_the_terminal_table_shows_busbw_only_where_a_case_has_one():
    with_probe = {"1n1g_fp32_b8": row_of(1, 1, 20.0),
                  "2n1g_fp32_b8": row_of(2, 1, 32.0, busbw_gbps=0.4776, speedup=1.6,
                                         efficiency=0.8, baseline_ips=33.0, delta=-0.03,
                                         speedup_delta=-0.121, verdict="regression")}
    assert dict(zip(TABLE_COLUMNS, table_rows(with_probe)[1]))["busbw"] == "0.48"
    lines = throughput_table(with_probe)
    assert lines[0].split()[6] == "busbw" and max(len(line) for line in lines[:4]) <= 110
    assert "busbw" not in throughput_table({"1n1g_fp32_b8": row_of(1, 1, 20.0)})[0]


# -- the --perf-collectives gate -----------------------------------------------------------

def test_every_run_below_the_band_is_a_collectives_regression():
    judged = judge_busbw("2n1g_fp32_b8", [0.5, 0.6, 0.55], 1.55, 0.1)
    assert judged.verdict == "regression" and judged.delta == pytest.approx(0.55 / 1.55 - 1)
    assert judged.message == ("2n1g_fp32_b8: busbw 0.55 GB/s, -65% against the baseline 1.55 "
                              "GB/s (tolerance 10%, runs 0.5, 0.6, 0.55)")


def test_a_median_below_the_band_that_a_run_is_not_takes_more_runs_then_is_inconclusive():
    runs = [0.5, 1.6, 0.55]
    assert judge_busbw("c", runs, 1.55, 0.1, more_runs=True).verdict == "inconclusive"
    final = judge_busbw("c", runs, 1.55, 0.1)
    assert final.verdict == "inconclusive" and final.message.endswith(
        ": not every run is below the band; rerun on a quieter fabric or raise --perf-set max-runs")


def test_collectives_pass_improvement_and_no_baseline():
    assert judge_busbw("c", [1.5, 1.6, 1.55], 1.55, 0.1).verdict == "pass"
    assert judge_busbw("c", [2.5, 2.6], 1.55, 0.1).verdict == "improvement"
    missing = judge_busbw("c", [1.5], None, 0.1)
    assert missing.verdict == "no-baseline" and "record one with --perf-update-baselines" in \
        missing.message
