"""The GPU tools on a host without one: one line, not a traceback; and every part of
tools/gpu/check.py that runs without a GPU: which paths run or skip, how a run is judged, and
the worker runs it starts (real torchrun on the CPU, faults injected for real)."""
import math

import pytest

from conftest import TINY_WORKER_RUN, run_tool
from tools.gpu.cuda_paths import FAILED, PASSED, CudaPath, Host, judge, paths, skip_reason
from tools.worker_runs import worker_run


@pytest.mark.parametrize("tool, options, name", [
    ("gpu-check", [], "rn50-perf gpu-check"), ("gpu-bench", [], "rn50-perf gpu-bench"),
    pytest.param("gpu-check", ["--measure", "gpu-hour"], "rn50-perf gpu-check --measure",
                 marks=pytest.mark.slow)])
def test_on_a_host_without_cuda_the_gpu_tools_say_so_in_one_line(tool, options, name, tmp_path):
    done = run_tool(tool, *options, cwd=tmp_path)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        f"{name}: needs a CUDA device; a CPU build of torch {torch_version()} sees none here "
        "(run it on a GPU host)"]
    assert not (tmp_path / "gpu-hour").exists()


@pytest.mark.parametrize("options", [["--steps", "peaks"], ["--budget", "540"]])
def test_the_measure_options_without_measure_are_refused_in_one_line(options, tmp_path):
    done = run_tool("gpu-check", *options, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        "rn50-perf gpu-check: error: --budget and --steps go with --measure DIR (see "
        "--help)")


def torch_version() -> str:
    import torch
    return torch.__version__


ALL_LIBRARIES = {"dali": None, "torchvision": None, "nvml": None}


def test_every_cuda_path_the_issue_names_is_checked():
    names = [path.name for path in paths(devices=8)]
    assert names[:5] == ["fp32", "tf32", "amp", "amp-static-loss-scale", "bf16"]
    assert {"contiguous", "sgd-foreach", "sgd-for-loop", "torch-compile", "cuda-graphs",
            "cuda-graphs-amp", "cuda-graphs-ddp", "nccl-8gpu", "dali-gpu", "dali-cpu",
            "torch-loader", "nvml-state", "oom-memory-limit", "oom-injected"} <= set(names)
    assert len(names) == len(set(names))
    assert "nccl-2gpu" in [path.name for path in paths(devices=2)]


def test_paths_skip_with_the_reason_where_devices_or_libraries_are_missing():
    one_gpu = Host(1, {"dali": "NVIDIA DALI is not installed (pip install nvidia-dali-cuda120)",
                       "torchvision": None, "nvml": None})
    reasons = {path.name: skip_reason(path, one_gpu) for path in paths(devices=1)}
    assert reasons["cuda-graphs-ddp"] == "needs 2 CUDA devices, found 1"
    assert reasons["nccl-2gpu"] == "needs 2 CUDA devices, found 1"
    assert reasons["dali-gpu"] == reasons["dali-cpu"] == \
        "NVIDIA DALI is not installed (pip install nvidia-dali-cuda120)"
    assert reasons["torch-loader"] is None and reasons["amp"] is None
    two_gpus = Host(2, ALL_LIBRARIES)
    assert all(skip_reason(path, two_gpus) is None for path in paths(devices=2))


OK_RECORD = {"outcome": "ok", "global_ips": 2900.0, "first_loss": 7.1, "last_loss": 6.9}


def test_a_run_passes_on_a_finite_loss_and_fails_otherwise():
    amp = CudaPath("amp", {"precision": "amp"})
    assert judge(amp, OK_RECORD) == (PASSED, "loss 7.100 -> 6.900")
    outcome, note = judge(amp, {**OK_RECORD, "last_loss": math.nan})
    assert outcome == FAILED and "loss not finite" in note
    outcome, note = judge(amp, {"outcome": "error", "message": "rank 1 failed: CUDA error"})
    assert (outcome, note) == (FAILED, "error: rank 1 failed: CUDA error")


def test_the_out_of_memory_paths_pass_only_when_the_run_ends_as_oom():
    oom = CudaPath("oom-memory-limit", expect="oom")
    assert judge(oom, {"outcome": "oom", "message": "CUDA out of memory"})[0] == PASSED
    assert judge(oom, OK_RECORD) == (FAILED, "expected out of memory, but the run finished")
    assert judge(oom, {"outcome": "error", "message": "x"})[0] == FAILED


def test_the_nvml_path_needs_every_ranks_clocks():
    nvml = CudaPath("nvml-state", needs="nvml")
    states = [{"sm_clock_mhz": 1980, "throttle_reasons": ["sw_power_cap"]},
              {"sm_clock_mhz": 1755.5, "throttle_reasons": []}]
    assert judge(nvml, {**OK_RECORD, "gpu_state_per_rank": states}) == \
        (PASSED, "SM clock 1980, 1756 MHz; reasons: sw_power_cap; no energy: not recorded")
    # The energy the run's record has, or NVML's reason for none (the path still passes: the
    # note is what a first GPU hour reads off).
    measured = {**OK_RECORD, "gpu_state_per_rank": states, "energy_joules": 61.4,
                "joules_per_image": 0.1199}
    assert judge(nvml, measured)[1].endswith("; 0.12 J/image (61.4 J)")
    unsupported = {**OK_RECORD, "gpu_state_per_rank": states, "joules_per_image": None,
                   "energy_note": "NVML does not report energy on this GPU (Not Supported)"}
    assert judge(nvml, unsupported)[1].endswith(
        "; no energy: NVML does not report energy on this GPU (Not Supported)")
    assert judge(nvml, {**OK_RECORD, "gpu_state_per_rank": None})[0] == FAILED
    assert judge(nvml, {**OK_RECORD, "gpu_state_per_rank": [{"sm_clock_mhz": "unknown"}]})[0] \
        == FAILED


@pytest.mark.slow
def test_a_worker_run_returns_the_failure_record_of_an_injected_oom(tmp_path, monkeypatch):
    """(A run's own record comes back through the path check in test_path_losses.py and, inside
    an image, test_image_path.py.)"""
    monkeypatch.setenv("RN50_DATA_CACHE", str(tmp_path))
    failure = worker_run(TINY_WORKER_RUN, extra_env={"RN50_FAULT": "oom@rank=0,iter=1"},
                         timeout=300)
    assert judge(CudaPath("oom-injected", expect="oom"), failure)[0] == PASSED, failure


@pytest.mark.slow
@pytest.mark.idle_wait
def test_a_hung_worker_run_ends_at_its_timeout_with_nothing_left(tmp_path, monkeypatch,
                                                                 hang_timeout):
    import tempfile

    from conftest import processes_mentioning
    monkeypatch.setenv("RN50_DATA_CACHE", str(tmp_path))
    # This run's folder under tmp_path, so the check below sees no other test's worker runs.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    failure = worker_run(TINY_WORKER_RUN, nproc=2,
                         extra_env={"RN50_FAULT": "stop@rank=1,iter=1"}, timeout=hang_timeout)
    assert failure["outcome"] == "error", failure
    assert failure["message"].startswith(f"no result after {hang_timeout} s (")
    assert "rank 1 (pid " in failure["message"] and ") stopped" in failure["message"]
    assert not processes_mentioning(str(tmp_path)), "a worker outlived its run"
