"""The worker as users and the suite run it: real torchrun, real gloo processes, real records."""
import io
import json
import re
import subprocess
import sys

import pynvml
import pytest
import torch
import torch.distributed as dist

from rn50_model import TrainConfig, timed_window, worker
from rn50_model.failures import is_out_of_memory
from rn50_model.faults import Fault
from rn50_model.gpu_state import GpuIdentity, GpuStateSampler
from rn50_model.record import EXIT_ERROR, EXIT_OOM, RECORD_MARK
from rn50_model.run_clock import MARKS
from rn50_model.startup import Placement
from rn50_model.training import Trainer

TINY = ["--precision", "fp32", "--batch-per-device", "2", "--image-size", "32",
        "--warmup-iters", "1", "--timed-iters", "3"]


def run_worker(args, env, nproc=None, timeout=180):
    if nproc:
        launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                    "--nproc-per-node", str(nproc)]
    else:
        launcher = [sys.executable]
    return subprocess.run(launcher + ["-m", "rn50_model.worker"] + args, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_two_gloo_workers_under_torchrun_write_a_valid_record(tmp_path, worker_env):
    run_dir = tmp_path / "run"
    done = run_worker(["--run-dir", str(run_dir), "--redirect-logs"] + TINY, worker_env, nproc=2)
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads((run_dir / "record.json").read_text())
    assert record["outcome"] == "ok" and record["world_size"] == 2
    assert record["device_type"] == "cpu" and record["threads_per_worker"] >= 1
    assert record["timed_images"] == 2 * 2 * 3
    assert record["global_ips"] == pytest.approx(12 / record["elapsed_s"])
    assert record["elapsed_s"] == max(record["per_rank_elapsed_s"])
    assert len(record["per_rank_ips"]) == 2 and len(record["iteration_times_s"]) == 3
    assert sum(record["iteration_times_s"]) <= record["elapsed_s"] * 1.01
    assert record["first_loss"] > 0 and record["last_loss"] > 0 and record["peak_memory_bytes"] > 0
    # Every step's loss, warm-up and window, for the path check's divergence rule.
    assert len(record["losses"]) == 1 + 3
    assert (record["losses"][0], record["losses"][-1]) == pytest.approx(
        (record["first_loss"], record["last_loss"]))
    assert record["peak_memory_covers"] == "whole process (peak resident set size)"
    # No GPU, no energy: None with the reason, never 0.
    assert (record["energy_joules"], record["joules_per_image"], record["energy_note"],
            record["energy_joules_per_rank"]) == (None, None, "no CUDA device", [None, None])
    assert record["config"]["batch_per_device"] == 2
    for key in ("torch", "cuda", "cudnn", "nccl", "dali", "driver", "python", "host", "hardware"):
        assert key in record["environment"]
    # One host, read by its local rank 0 around its own window; without a launcher's token the
    # run's processes are torchrun's agent and its two workers. Whether the host was quiet is
    # not this test's to say.
    [host] = record["host_state"]
    assert set(host) == {"host", "node", "window_s", "cpu_count", "other_cores", "own_processes",
                         "steal_cores", "throttled_periods", "throttled_s", "cpu_pressure",
                         "memory_pressure", "governor", "frequency_mhz", "loadavg"}
    assert host["own_processes"] >= 3 and host["window_s"] >= record["per_rank_elapsed_s"][0]
    assert isinstance(record["host_busy"], list)
    # The same record is on stdout, for launchers whose run folder is not shared between nodes.
    lines = [line for line in done.stdout.splitlines() if line.startswith(RECORD_MARK)]
    assert len(lines) == 1 and json.loads(lines[0][len(RECORD_MARK):]) == record
    assert (run_dir / "rank0.log").exists() and (run_dir / "rank1.log").exists()
    # Rank 0's marks of its phases (rn50_model/run_clock.py), each one reached in order.
    assert list(record["marks"]) == list(MARKS)
    assert list(record["marks"].values()) == sorted(record["marks"].values())
    opened, closed = record["marks"]["window_opened"], record["marks"]["window_closed"]
    assert closed - opened == pytest.approx(record["per_rank_elapsed_s"][0], abs=0.01)


def test_worker_reads_real_jpegs_through_dali(tmp_path, worker_env, jpeg_folder):
    done = run_worker(["--run-dir", str(tmp_path), "--data-backend", "dali-cpu",
                       "--data-dir", str(jpeg_folder)] + TINY, worker_env)
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads((tmp_path / "record.json").read_text())
    assert record["config"]["data_backend"] == "dali-cpu" and record["global_ips"] > 0


def test_impossible_allocation_is_an_oom_record(tmp_path, worker_env):
    # 64 images of 224 px cannot train in 300 MB more than start-up needs: a real allocator failure.
    done = run_worker(["--run-dir", str(tmp_path), "--precision", "fp32", "--image-size", "224",
                       "--batch-per-device", "64", "--warmup-iters", "1", "--timed-iters", "1",
                       "--memory-limit-bytes", str(300 * 2**20)], worker_env)
    assert done.returncode == EXIT_OOM, done.stderr[-2000:]
    failure = json.loads((tmp_path / "rank0.failure.json").read_text())
    assert failure["outcome"] == "oom", failure
    assert is_out_of_memory(RuntimeError(failure["message"]), memory_limited=True), failure
    assert not (tmp_path / "record.json").exists()


def test_a_raising_rank_writes_its_failure(tmp_path, worker_env):
    worker_env["RN50_FAULT"] = "raise@rank=0,iter=1"
    done = run_worker(["--run-dir", str(tmp_path)] + TINY, worker_env)
    assert done.returncode == EXIT_ERROR
    failure = json.loads((tmp_path / "rank0.failure.json").read_text())
    assert failure["outcome"] == "error"
    assert failure["message"] == "injected fault on rank 0 at iteration 1"
    assert "Traceback" in failure["traceback"]


def test_a_bad_setting_is_an_error_record_not_a_traceback_only(tmp_path, worker_env):
    done = run_worker(["--run-dir", str(tmp_path), "--precision", "amp"] + TINY[2:], worker_env)
    assert done.returncode == EXIT_ERROR
    failure = json.loads((tmp_path / "rank0.failure.json").read_text())
    assert failure["error_type"] == "ConfigError" and "needs a CUDA device" in failure["message"]


@pytest.mark.parametrize("spec, expected", [
    ("kill@rank=1,iter=3", Fault("kill", 1, 3)),
    ("stop@iter=2", Fault("stop", 0, 2)),
    ("raise@rank=1,iter=0,batch=4", Fault("raise", 1, 0, 4)),
    ("slow@share=0.1", Fault("slow", 0, 0, share=0.1)),
    ("grow@mib=200", Fault("grow", 0, 0, mib=200)),
    ("diverge@iter=1,times=1000", Fault("diverge", 0, 1, times=1000.0)),
])
def test_fault_specs_parse(monkeypatch, spec, expected):
    monkeypatch.setenv("RN50_FAULT", spec)
    assert Fault.from_environment() == expected


@pytest.mark.parametrize("spec, words", [
    ("explode@rank=0", "is not one of raise, kill, stop, oom, slow, grow"),
    ("grow", "mib=N (N > 0) goes with grow"),
    ("raise@iter=1,mib=10", "mib=N (N > 0) goes with grow"),
    ("slow", "share=S (0 < S < 1) goes with slow"),
    ("slow@share=1", "share=S (0 < S < 1) goes with slow"),
    ("raise@iter=1,share=0.1", "share=S (0 < S < 1) goes with slow"),
    ("diverge@iter=1", "times=F (F > 1) goes with diverge"),
    ("raise@iter=1,times=10", "times=F (F > 1) goes with diverge"),
    ("slow@share=a", "does not parse; use kind@rank=R,iter=I[,batch=B], slow@share=S, "
                     "grow@mib=N or diverge@iter=I,times=F"),
])
def test_a_bad_fault_spec_is_one_line(monkeypatch, spec, words):
    monkeypatch.setenv("RN50_FAULT", spec)
    with pytest.raises(SystemExit, match=re.escape(words)):
        Fault.from_environment()


def test_a_slow_fault_waits_its_share_of_each_step(monkeypatch):
    """share 0.2: a step of 80 ms waits 20 ms more, so 100 ms in all and 80% of the throughput."""
    waits = []
    monkeypatch.setattr("rn50_model.faults.time.sleep", waits.append)
    Fault("slow", 0, 0, share=0.2).stretch(0.08)
    Fault("raise", 0, 1).stretch(0.08)
    assert waits == [pytest.approx(0.02)]


@pytest.mark.slow
def test_a_slow_worker_still_writes_a_valid_record(tmp_path, worker_env):
    worker_env["RN50_FAULT"] = "slow@share=0.5"
    done = run_worker(["--run-dir", str(tmp_path)] + TINY, worker_env)
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads((tmp_path / "record.json").read_text())
    assert record["outcome"] == "ok" and len(record["iteration_times_s"]) == 3


def noting(calls: list, name: str, function=lambda *args, **kwargs: None):
    """`function`, noting `name` in `calls` each time it is called."""
    def noted(*args, **kwargs):
        calls.append(name)
        return function(*args, **kwargs)
    return noted


@pytest.fixture
def gloo_group_of_one(tmp_path):
    """This process as rank 0 of a real gloo group of one, so the window opens with a barrier;
    the torch threads the worker sets are given back afterwards."""
    threads = torch.get_num_threads()
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}",
                            rank=0, world_size=1)
    yield
    dist.destroy_process_group()
    torch.set_num_threads(threads)


def test_a_rank_sets_everything_up_before_the_barrier_that_opens_its_window(monkeypatch,
                                                                            gloo_group_of_one):
    """The slowest rank's window decides the global img/s: NVML's start-up (different on every
    rank) and the restart of the peak-memory counter come after warm-up and before the barrier;
    the energy counter is read once after the barrier and once after the last step. A real CPU
    run; NVML (no GPU here) and the counter are stand-ins that note their calls."""
    calls = []
    energy_mj = iter([1_000_000, 1_002_500])
    monkeypatch.setattr(pynvml, "nvmlInit", noting(calls, "nvml init"))
    monkeypatch.setattr(pynvml, "nvmlDeviceGetTotalEnergyConsumption",
                        noting(calls, "nvml energy", lambda handle: next(energy_mj)))
    monkeypatch.setattr(pynvml, "nvmlDeviceGetHandleByIndex",
                        noting(calls, "nvml handle", lambda index: "handle"))
    monkeypatch.setattr(pynvml, "nvmlShutdown", noting(calls, "nvml shutdown"))
    monkeypatch.setattr(timed_window, "gpu_state_sampler",
                        lambda device: GpuStateSampler(GpuIdentity(index=0), interval=3600))
    monkeypatch.setattr(timed_window, "reset_peak_memory", noting(calls, "reset peak memory"))
    monkeypatch.setattr(dist, "barrier", noting(calls, "barrier", dist.barrier))
    monkeypatch.setattr(Trainer, "step", noting(calls, "step", Trainer.step))
    # One thread, as the suite's workers on this machine: more spin against the other sessions.
    config = TrainConfig(precision="fp32", batch_per_device=2, image_size=32, num_classes=10,
                         warmup_iters=2, timed_iters=2, threads=1)

    record = timed_window.measure(config, Placement())

    assert calls == ["step", "step", "reset peak memory", "nvml init", "nvml handle", "barrier",
                     "nvml energy", "step", "step", "nvml energy", "nvml shutdown"]
    assert record["outcome"] == "ok" and len(record["iteration_times_s"]) == 2
    # 2.5 J over the window's 2 x 2 images, on the record under the names the suite reads.
    assert (record["energy_joules"], record["joules_per_image"], record["energy_note"],
            record["energy_joules_per_rank"]) == (2.5, 0.625, None, [2.5])


def test_the_cuda_peak_restarts_after_warm_up_and_the_record_says_what_it_covers(monkeypatch):
    """cuDNN's benchmark trials in the first steps must not count in a max-batch verdict."""
    gpu = torch.device("cuda", 1)
    calls = []
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats",
                        noting(calls, "reset", lambda device: calls.append(device)))
    monkeypatch.setattr(torch.cuda, "max_memory_allocated",
                        noting(calls, "peak", lambda device: calls.append(device) or 5 * 2**30))
    timed_window.reset_peak_memory(gpu)
    assert timed_window.peak_memory_bytes(gpu) == 5 * 2**30
    assert calls == ["reset", gpu, "peak", gpu]
    assert timed_window.peak_memory_covers(gpu, cuda_graphs=False) == "timed window (after warm-up)"
    # A graph's replays allocate nothing: its capture, after warm-up, is where its memory shows.
    assert (timed_window.peak_memory_covers(gpu, cuda_graphs=True)
            == "CUDA graph capture and timed window (after warm-up)")


def failure_of(message: str, tmp_path):
    """The exit code and failure record of a rank whose training raised `message`."""
    console = io.StringIO()
    try:
        raise RuntimeError(message)
    except RuntimeError as error:
        code = worker.report_failure(tmp_path, Placement(), error, console)
    return code, json.loads((tmp_path / "rank0.failure.json").read_text())


@pytest.mark.parametrize("message", [
    # As torch raises them when cuBLAS or cuDNN cannot allocate their own handle or workspace.
    "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
    "cuDNN error: CUDNN_STATUS_ALLOC_FAILED",
])
def test_a_cuda_library_that_cannot_allocate_ran_out_of_memory(message, tmp_path):
    code, failure = failure_of(message, tmp_path)
    assert code == EXIT_OOM and failure["outcome"] == "oom"
    assert failure["message"] == message


@pytest.mark.parametrize("message", [
    "CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasSgemm( handle, opa, opb, "
    "m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc)`",
    # Often memory, but a broken driver or library too: not a result to report as a boundary.
    "CUDA error: CUBLAS_STATUS_NOT_INITIALIZED when calling `cublasCreate(handle)`",
    "cuDNN error: CUDNN_STATUS_NOT_SUPPORTED. This error may appear if you passed in a "
    "non-contiguous input.",
])
def test_other_cuda_library_failures_stay_errors(message, tmp_path):
    code, failure = failure_of(message, tmp_path)
    assert code == EXIT_ERROR and failure["outcome"] == "error"
