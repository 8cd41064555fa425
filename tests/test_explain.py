"""The operator profile's summary and its comparison with a baseline's (`--perf-explain`), over
small stored profiles: per-iteration times, kernel families, host against device, the failure
lines, the report table, and the op_profile kept in baseline files and by promotion."""
import json

import pytest

from conftest import REPO_ROOT, baseline_document
from perf_tests.baselines.file import BaselineError, load_baseline_file, measured_entry
from perf_tests.modes.explain.comparison import (compare, explanation_lines, markdown_section,
                                                 native_batch_norm_note, where_text)
from perf_tests.modes.explain.profiling import ProfileRun, explain, wants_profile
from rn50_model.op_profile import (KEPT_OPERATORS, EventTotals, family_of, profile_steps, summarize,
                                   summary_problem)
from tools import promote_baseline


def cpu_profile(step_ms, **operators):
    """A stored CPU summary: operator name (`__` for `::`) -> ms per iteration."""
    rows = {name.replace("__", "::"): {"ms": value, "host_ms": value, "calls": 1.0}
            for name, value in operators.items()}
    return {"schema_version": 1, "device_type": "cpu", "iterations": 3, "world_size": 1,
            "step_ms": step_ms, "host_ms": sum(operators.values()), "device_ms": None,
            "operators": rows, "families": {"convolution": operators.get("aten__convolution_"
                                                                         "backward", 0.0)},
            "communication_share": None}


BEFORE = cpu_profile(40.0, aten__convolution_backward=12.1, aten__add_=5.0, aten__mm=2.0,
                     aten__old_op=1.0, aten__tiny=0.01)
AFTER = cpu_profile(52.0, aten__convolution_backward=15.9, aten__add_=5.1, aten__mm=4.0,
                    aten__new_op=3.0, aten__tiny=0.05)


def test_summary_is_per_iteration_self_time_with_families_on_cpu():
    events = [EventTotals("aten::convolution_backward", 30, 36_000.0, 0.0, False),
              EventTotals("aten::add_", 300, 9_000.0, 0.0, False),
              EventTotals("aten::mm", 3, 3_000.0, 0.0, False),
              EventTotals("Optimizer.step#SGD.step", 3, 1_500.0, 0.0, False),
              EventTotals("ProfilerStep#4", 1, 99_000.0, 0.0, False)]
    summary = summarize(events, iterations=3, wall_s=0.060, device_type="cpu")
    assert summary["step_ms"] == 20.0 and summary["host_ms"] == 16.5
    assert summary["device_ms"] is None and summary["communication_share"] is None
    assert list(summary["operators"]) == ["aten::convolution_backward", "aten::add_", "aten::mm",
                                          "Optimizer.step#SGD.step"]  # largest first, no wrapper
    assert summary["operators"]["aten::convolution_backward"] == {"ms": 12.0, "host_ms": 12.0,
                                                                  "calls": 10.0}
    assert summary["families"] == {"convolution": 12.0, "elementwise": 3.0, "gemm": 1.0,
                                   "optimizer": 0.5}
    assert summary_problem(summary) is None


def test_summary_on_cuda_counts_kernels_for_device_time_and_communication():
    events = [EventTotals("aten::convolution_backward", 20, 2_000.0, 8_000.0, False),
              EventTotals("aten::add_", 20, 1_000.0, 400.0, False),
              EventTotals("sm90_xmma_dgrad_implicit_gemm_f16", 20, 0.0, 8_000.0, True),
              EventTotals("ampere_sgemm_128x64_tn", 2, 0.0, 600.0, True),
              EventTotals("ncclDevKernel_AllReduce_Sum_f16_RING_LL", 2, 0.0, 1_000.0, True),
              EventTotals("void at::native::vectorized_elementwise_kernel<4>", 20, 0.0, 400.0,
                          True)]
    summary = summarize(events, iterations=2, wall_s=0.010, device_type="cuda", world_size=8)
    assert summary["device_ms"] == 5.0 and summary["host_ms"] == 1.5 and summary["step_ms"] == 5.0
    # Operators are timed by their kernels on the device; implicit-GEMM convolution kernels are
    # convolution, not GEMM.
    assert summary["operators"]["aten::convolution_backward"]["ms"] == 4.0
    assert summary["families"] == {"convolution": 4.0, "communication": 0.5, "gemm": 0.3,
                                   "elementwise": 0.2}
    assert summary["communication_share"] == 0.1
    assert list(summary["kernels"])[0] == "sm90_xmma_dgrad_implicit_gemm_f16"


@pytest.mark.parametrize("name, family", [
    ("aten::cudnn_convolution", "convolution"), ("aten::addmm", "gemm"),
    ("gloo:all_reduce", "communication"), ("c10d::allreduce_", "communication"),
    ("aten::_foreach_add_", "optimizer"), ("aten::native_batch_norm", "normalization"),
    ("aten::threshold_backward", "elementwise"), ("aten::empty", "other")])
def test_kernel_families(name, family):
    assert family_of(name) == family


# Kernel names as CUDA profiles of ResNet50 training report them (cuDNN 8/9, torch's own).
CONVOLUTION_KERNELS = (
    "sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x16"
    "_stage4_warpsize2x2x1_g1_tensor16x8x8_kernel",
    "sm90_xmma_dgrad_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize64x64x64_stage4",
    "void cudnn::detail::implicit_convolve_sgemm<float, float, 1024, 5, 5, 3, 3, 3, 1, false, "
    "false, true>(int, int, int, float const*, int, float*, float const*, kernel_conv_params)",
    "void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>(cudnn::"
    "winograd_nonfused::WinogradDataParams<float, float>)",
    "void cudnn::cnn::wgrad2d_grouped_direct_kernel<false, true, int, float, float, float>",
    "aten::cudnn_convolution")
NORMALIZATION_KERNELS = (
    "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512, true, 1>(cudnnTensorStruct, "
    "float const*, cudnnTensorStruct, float*, float const*, float const*, float, float)",
    "void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 512, true, 1>(float, float, float, "
    "float, cudnnTensorStruct, float const*, cudnnTensorStruct, float const*)",
    "void bn_fw_tr_1C11_singleread<float, 512, true, 1, 2, 0>(cudnnTensorStruct, float const*)",
    "void cudnn::batchnorm_fwtr_nhwc_semiPersist<__half, float, float, 512, true, false, true, "
    "false>(cudnn::bn_fwtr_nhwc_params<__half, float>)",
    "void cudnn::batchnorm_bwtr_nhwc_semiPersist<__half, float, float, 512, true, false, false>",
    "void at::native::batch_norm_collect_statistics_channels_last_kernel<float, float, 4>",
    "aten::cudnn_batch_norm", "aten::cudnn_batch_norm_backward")


@pytest.mark.parametrize("name", CONVOLUTION_KERNELS)
def test_cudnn_convolution_kernels_are_convolution(name):
    assert family_of(name) == "convolution"


@pytest.mark.parametrize("name", NORMALIZATION_KERNELS)
def test_cudnn_batch_norm_kernels_are_normalization_not_convolution(name):
    assert family_of(name) == "normalization"


def test_a_cuda_profile_splits_convolution_from_batch_norm_and_waits_are_not_host_work():
    events = [EventTotals(CONVOLUTION_KERNELS[0], 2, 0.0, 6_000.0, True),
              EventTotals(NORMALIZATION_KERNELS[0], 2, 0.0, 1_000.0, True),
              EventTotals(NORMALIZATION_KERNELS[1], 2, 0.0, 1_000.0, True),
              EventTotals("aten::cudnn_batch_norm", 2, 400.0, 1_000.0, False),
              EventTotals("cudaLaunchKernel", 6, 600.0, 0.0, False),
              # The closing torch.cuda.synchronize(): the host waiting for the queued kernels.
              EventTotals("cudaDeviceSynchronize", 1, 7_000.0, 0.0, False)]
    summary = summarize(events, iterations=2, wall_s=0.008, device_type="cuda")
    assert summary["families"] == {"convolution": 3.0, "normalization": 1.0}
    assert summary["host_ms"] == 0.5 and summary["device_ms"] == 4.0
    assert "cudaDeviceSynchronize" not in summary["operators"]


def test_the_closing_sync_counts_in_the_step_time_not_in_the_host_time(tmp_path):
    import time

    import torch
    from torch.profiler import record_function
    weights = torch.randn(64, 64)
    in_steps = []  # seconds each step took, under the profiler

    def train_step(iteration):  # small single-threaded operators: cheap on a busy host too
        started = time.perf_counter()
        for _ in range(10):
            weights.add(1.0)
        in_steps.append(time.perf_counter() - started)

    def synchronize():
        # As a CUDA profile records torch.cuda.synchronize(): a host event of this name whose
        # self time is the wait for the device's queued kernels. It outlasts all the steps, so
        # counted as host time it would show however slow the host.
        with record_function("cudaDeviceSynchronize"):
            time.sleep(0.3 + sum(in_steps))

    summary = profile_steps(train_step, 3, 0, torch.device("cpu"), synchronize, 1,
                            tmp_path / "trace.json")
    assert summary["step_ms"] >= 100  # the step is done when its kernels are
    # The operators ran inside the steps: their host time is at most the steps' own.
    steps_ms = sum(in_steps) * 1000 / 3
    assert summary["host_ms"] <= steps_ms, (summary, steps_ms)
    assert "cudaDeviceSynchronize" not in summary["operators"]
    assert summary["operators"]["aten::add"]["calls"] == 10
    assert (tmp_path / "trace.json").stat().st_size > 0


def test_comparison_names_the_operators_that_grew_most_and_new_and_vanished_ones():
    comparison = compare(BEFORE, AFTER)
    assert [change.text() for change in comparison.grown] == [
        "aten::convolution_backward +31% (12.1 -> 15.9 ms/iter)", "aten::mm +100% (2.00 -> "
        "4.00 ms/iter)"]  # aten::add_ and aten::tiny moved less than 0.5% of the step
    assert [change.text() for change in comparison.new] == ["aten::new_op 3.00 ms/iter"]
    assert [change.text() for change in comparison.vanished] == ["aten::old_op 1.00 ms/iter"]
    assert comparison.rows[0].name == "aten::convolution_backward"


def test_an_operator_below_a_truncated_profiles_smallest_is_not_called_new():
    many = {f"aten__op{number}": 10.0 for number in range(KEPT_OPERATORS)}
    before = cpu_profile(1000.0, **many)
    after = cpu_profile(1000.0, **many, aten__rare=6.0, aten__big=20.0)
    assert [change.name for change in compare(before, after).new] == ["aten::big"]


def test_failure_lines_against_a_baseline_profile(tmp_path):
    lines = explanation_lines(AFTER, BEFORE, tmp_path / "trace.json")
    assert lines[0] == ("operator profile (3 profiled iterations) against the baseline's: the "
                        "operators whose self time per iteration grew most:")
    assert lines[1] == "  aten::convolution_backward +31% (12.1 -> 15.9 ms/iter)"
    assert "  new: aten::new_op 3.00 ms/iter; vanished: aten::old_op 1.00 ms/iter" in lines
    assert ("  where: on the host (a CPU run: every operator runs there): host 20.1 -> 28.1 "
            "ms/iter, step 40.0 -> 52.0 ms/iter") in lines
    assert lines[-1] == f"  trace: {tmp_path / 'trace.json'} (Perfetto or chrome://tracing)"


def test_without_a_baseline_profile_the_current_top_operators_and_what_is_needed(tmp_path):
    lines = explanation_lines(AFTER, None, tmp_path / "trace.json")
    assert "the comparison needs a baseline recorded with one" in lines[0]
    assert lines[1] == "  aten::convolution_backward 15.9 ms/iter (31% of the step)"


def h200_profile(case_id):
    """A stored CUDA profile: the H200 hour's, in baselines/nvidia-h200.json."""
    return load_baseline_file(REPO_ROOT / "baselines" / "nvidia-h200.json").entry(
        case_id).op_profile


def test_a_bf16_profile_led_by_native_batch_norm_says_so_first(tmp_path):
    """The H200's bf16 b256 profile: aten::native_batch_norm 13.7 and its backward 10.8 ms an
    iteration lead it, where amp's batch norm is cuDNN's."""
    bf16 = h200_profile("1n1g_bf16_b256")
    lines = explanation_lines(bf16, None, tmp_path / "trace.json", "bf16")
    assert lines[0] == (
        "bf16: batch norm runs torch's own kernels here (aten::native_batch_norm + "
        "aten::native_batch_norm_backward 24.5 ms/iter, 44% of the step), not cuDNN's as under "
        "amp: eager bf16 measured 19-23% behind amp on an H100 and an H200, and --perf-set "
        "compile=on removes the gap (docs/gpu.md)")
    assert lines[1].startswith("operator profile (3 profiled iterations): the baseline entry")
    # Against a bf16 baseline that had them too, the line still comes first.
    assert explanation_lines(bf16, bf16, tmp_path / "trace.json", "bf16")[0].startswith("bf16: ")


def test_no_batch_norm_note_for_amp_for_cpu_or_where_native_batch_norm_is_minor():
    bf16, amp = h200_profile("1n1g_bf16_b256"), h200_profile("1n1g_amp_b256")
    assert native_batch_norm_note("bf16", bf16)
    assert native_batch_norm_note("amp", amp) is None
    assert native_batch_norm_note("bf16", amp) is None    # cuDNN's batch norm: nothing to say
    assert native_batch_norm_note("amp", bf16) is None
    assert native_batch_norm_note(None, bf16) is None
    # On CPU every precision runs torch's own batch norm: no word about bf16 there.
    cpu = cpu_profile(50.0, aten__native_batch_norm=20.0, aten__mm=5.0)
    assert native_batch_norm_note("bf16", cpu) is None
    # Sixth of the operators and not grown: not what leads the profile.
    minor = {**bf16, "operators": {
        **{f"aten::op{number}": {"ms": 10.0 - number} for number in range(5)},
        "aten::native_batch_norm": {"ms": 1.0}}}
    assert native_batch_norm_note("bf16", minor) is None


def test_the_batch_norm_note_comes_where_native_batch_norm_grew_most(tmp_path):
    from perf_tests.modes.explain.comparison import OperatorChange
    bf16 = h200_profile("1n1g_bf16_b256")
    minor = {**bf16, "operators": {
        **{f"aten::op{number}": {"ms": 10.0 - number} for number in range(5)},
        "aten::native_batch_norm_backward": {"ms": 1.5}}}
    grown = [OperatorChange("aten::native_batch_norm_backward", 0.5, 1.5)]
    assert native_batch_norm_note("bf16", minor, grown).startswith(
        "bf16: batch norm runs torch's own kernels here (aten::native_batch_norm + "
        "aten::native_batch_norm_backward 1.50 ms/iter, ")


def test_host_or_device_on_cuda():
    base = {"device_type": "cuda", "step_ms": 100.0, "device_ms": 90.0, "host_ms": 30.0}
    host_bound = {**base, "step_ms": 130.0, "device_ms": 92.0, "host_ms": 60.0}
    device_bound = {**base, "step_ms": 130.0, "device_ms": 120.0}
    assert where_text(base, host_bound).startswith("on the host (launch-bound or host syncs")
    assert where_text(base, device_bound).startswith("on the device: device 90.0 -> 120.0")


@pytest.mark.parametrize("mode, verdict, updating, wanted", [
    ("auto", "pass", False, False), ("auto", "regression", False, True),
    ("auto", "pass", True, True), ("auto", "no-baseline", True, True),
    ("always", "pass", False, True), ("always", "error", False, False),
    ("never", "regression", False, False), ("never", "pass", True, False),
    ("auto", "skipped", True, False)])
def test_when_a_case_is_profiled(mode, verdict, updating, wanted):
    assert wants_profile(mode, verdict, updating) is wanted


def test_explain_writes_both_summaries_and_the_report_table(tmp_path):
    folder = tmp_path / "1n1g_fp32_b8" / "profile"
    folder.mkdir(parents=True)
    explanation = explain(ProfileRun(folder, AFTER, "", 4.2), BEFORE, tmp_path)
    details = explanation.details["explain"]
    assert details["baseline_op_profile"] == "1n1g_fp32_b8/profile/baseline_op_profile.json"
    assert json.loads((tmp_path / details["baseline_op_profile"]).read_text()) == BEFORE
    assert details["trace"] == "1n1g_fp32_b8/profile/trace.json"
    assert explanation.details["op_profile"] == AFTER and details["profile_seconds"] == 4.2
    section = "\n".join(markdown_section({"1n1g_fp32_b8": explanation.details}))
    assert "| `aten::convolution_backward` | 12.1 | 15.9 | +31% |" in section
    assert "| `aten::new_op` | - | 3.00 | new |" in section
    assert "| `aten::old_op` | 1.00 | - | vanished |" in section


def test_a_failed_profiled_run_is_one_line(tmp_path):
    explanation = explain(ProfileRun(tmp_path, None, "rank 0 failed: RuntimeError: boom", 1.0),
                          BEFORE, tmp_path)
    assert explanation.lines == [f"no operator profile: rank 0 failed: RuntimeError: boom "
                                 f"(logs in {tmp_path})"]


def test_a_baseline_entry_keeps_its_op_profile_and_a_bad_one_is_one_line(tmp_path):
    path = tmp_path / "baseline.json"
    entry = measured_entry([10.0, 11.0], tolerance=0.15, speedup=1.0, environment={},
                           settings={}, source="measured", op_profile=BEFORE)
    path.write_text(json.dumps(baseline_document({"1n1g_fp32_b8": entry})))
    assert load_baseline_file(path).entry("1n1g_fp32_b8").op_profile == BEFORE
    broken = {**BEFORE, "operators": {"aten::mm": {"ms": "fast"}}}
    path.write_text(json.dumps(baseline_document({"1n1g_fp32_b8": {**entry,
                                                                   "op_profile": broken}})))
    with pytest.raises(BaselineError) as error:
        load_baseline_file(path)
    assert str(error.value).startswith(f"baseline file {path} entry 1n1g_fp32_b8 has an "
                                       "op_profile that has operator 'aten::mm' without a "
                                       "number 'ms'")
    assert "\n" not in str(error.value)


def results_with(op_profile) -> dict:
    return {"schema_version": 1, "hardware": "test-hardware", "profile": "smoke",
            "environment": {"torch": "2.13.0"},
            "cases": {"1n1g_fp32_b8": {"nodes": 1, "gpus_per_node": 1, "batch_per_device": 8,
                                       "precision": "fp32", "runs_ips": [10.0] * 10,
                                       "median_ips": 10.0, "verdict": "pass",
                                       "op_profile": op_profile}}}


def test_promotion_keeps_the_op_profile_and_rejects_a_bad_one(tmp_path, capsys):
    results, baseline = tmp_path / "results.json", tmp_path / "baseline.json"
    results.write_text(json.dumps(results_with(AFTER)))
    assert promote_baseline.main([str(results), "--baseline-file", str(baseline)]) == 0
    assert json.loads(baseline.read_text())["entries"]["1n1g_fp32_b8"]["op_profile"] == AFTER

    results.write_text(json.dumps(results_with({"schema_version": 7})))
    assert promote_baseline.main([str(results), "--baseline-file", str(baseline)]) == 2
    error = capsys.readouterr().err.strip()
    assert error == (f"rn50-perf promote: error: results file {results}: case "
                     "1n1g_fp32_b8 has an op_profile that has schema_version 7, this suite "
                     "reads 1; fix it, or leave the case out with -k")
