"""The environment a record carries: versions, hardware keys, and the GPU's state through NVML.

NVML cannot exist on these CPU machines, so its tests put a stand-in `pynvml` module in place
(tests/stand_in_nvml.py); the absent-library path runs for real."""
import subprocess
import sys

import pytest
import torch

from perf_tests.judging.host_marks import throttling_note
from rn50_model import environment
from rn50_model.environment import collect_environment, hardware_key
from rn50_model.gpu_fitness import is_throttling, throttle_reason_names
from rn50_model.gpu_state import GpuIdentity, GpuStateSampler, gpu_state, summarize_gpu_states
from stand_in_nvml import StandInNVML


@pytest.mark.parametrize("device, key", [
    ("NVIDIA H200", "nvidia-h200"),
    ("NVIDIA H100 80GB HBM3", "nvidia-h100-80gb-hbm3"),
    ("Tesla V100-SXM2-16GB", "tesla-v100-sxm2-16gb"),
    ("NVIDIA A100-SXM4-80GB", "nvidia-a100-sxm4-80gb"),
])
def test_hardware_key_of_a_gpu(device, key):
    assert hardware_key(device) == key


@pytest.mark.parametrize("cpu, key", [
    ("AMD EPYC", "cpu-amd-epyc"),
    ("Intel(R) Xeon(R) Platinum 8480+", "cpu-intel-xeon-platinum-8480"),
    ("AMD EPYC 7B13 64-Core Processor", "cpu-amd-epyc-7b13"),
])
def test_hardware_key_of_a_cpu_host(monkeypatch, cpu, key):
    monkeypatch.setattr(environment, "cpu_model", lambda: cpu)
    assert hardware_key(None) == key


def test_cpu_environment_has_every_version_and_no_gpu_state():
    facts = collect_environment()
    for key in ("python", "torch", "cuda", "cudnn", "nccl", "dali", "torchvision", "driver",
                "host", "cpu", "hardware"):
        assert facts[key], key
    assert facts["device_count"] == 0 and "gpu_state" not in facts
    assert facts["hardware"].startswith("cpu-")


def test_without_nvml_the_gpu_state_is_empty():
    # Here pynvml is either missing or cannot find libnvidia-ml: both mean "unknown".
    assert gpu_state() == {}


def test_gpu_state_reads_clocks_power_temperature_and_throttle_reasons(monkeypatch):
    nvml = StandInNVML(reasons=0x4 | 0x20)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    state = gpu_state(0)
    assert state == {"driver": "580.159", "sm_clock_mhz": 1755, "max_sm_clock_mhz": 1980,
                     "memory_clock_mhz": 3201, "power_w": 612.345, "power_limit_w": 700.0,
                     "temperature_c": 71,
                     "throttle_reasons": ["sw_power_cap", "sw_thermal_slowdown"],
                     "pcie_gen": 5, "pcie_width": 16}
    assert is_throttling(state) and nvml.shut_down


def test_drivers_before_r535_fall_back_to_the_throttle_reasons_call(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", StandInNVML(reasons=0x40, new_reasons_call=False))
    assert gpu_state(0)["throttle_reasons"] == ["hw_thermal_slowdown"]


@pytest.mark.parametrize("identity, power", [
    # CUDA_VISIBLE_DEVICES=1: torch's device 0 is NVML's GPU 1; the UUID finds the right one.
    (GpuIdentity(index=0, uuid="GPU-bbbb", pci_bus_id="00000000:86:00.0"), 400.0),
    (GpuIdentity(index=0, uuid=None, pci_bus_id="00000000:86:00.0"), 400.0),
    (GpuIdentity(index=0, uuid="GPU-unknown", pci_bus_id="00000000:86:00.0"), 400.0),
    (GpuIdentity(index=0), 612.345),  # nothing better known: the index
])
def test_the_gpu_is_looked_up_by_uuid_then_pci_bus_id_not_by_torch_index(monkeypatch, identity,
                                                                          power):
    monkeypatch.setitem(sys.modules, "pynvml", StandInNVML(reasons=0))
    assert gpu_state(identity)["power_w"] == power


def test_gpu_identity_comes_from_torch_device_properties(monkeypatch):
    import torch

    class Properties:
        uuid = "bbbb"  # torch prints the UUID without nvidia-smi's GPU- prefix
        pci_domain_id, pci_bus_id, pci_device_id = 0, 0x86, 0

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: Properties())
    identity = GpuIdentity.of(torch.device("cuda", 0))
    assert identity == GpuIdentity(index=0, uuid="GPU-bbbb", pci_bus_id="00000000:86:00.0")


def test_sw_power_cap_alone_is_not_a_slowdown():
    # H100/H200 run at their power cap under full load: the baseline ran capped too.
    assert not is_throttling({"throttle_reasons": ["sw_power_cap"]})
    assert is_throttling({"throttle_reasons": ["sw_power_cap", "hw_slowdown"]})


def test_the_sampler_reads_from_its_own_thread_between_init_and_shutdown(monkeypatch):
    import threading
    nvml = StandInNVML(reasons=0x4)
    readers = set()
    read_clock = nvml.nvmlDeviceGetClockInfo

    def clock(handle, kind):
        readers.add(threading.current_thread().name)
        return read_clock(handle, kind)

    nvml.nvmlDeviceGetClockInfo = clock
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    with GpuStateSampler(0, interval=0.01) as sampler:
        assert nvml.initialised == 1 and not nvml.shut_down
        threading.Event().wait(0.1)
    assert nvml.shut_down and readers == {"gpu-state"}
    summary = sampler.summary()
    assert summary["readings"] >= 2 and summary["sm_clock_mhz"] == 1755
    assert summary["throttle_reasons"] == ["sw_power_cap"]


def test_a_window_shorter_than_the_interval_is_read_once_after_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", StandInNVML(reasons=0))
    with GpuStateSampler(0, interval=60) as sampler:
        pass
    assert sampler.summary()["readings"] == 1


def test_sampler_without_nvml_reads_nothing():
    with GpuStateSampler(0, interval=0.01) as sampler:
        pass
    assert sampler.summary() == {}


def test_readings_fold_into_median_lowest_clock_hottest_and_every_reason():
    readings = [{"sm_clock_mhz": 1980, "temperature_c": 60, "power_w": 500.0,
                 "throttle_reasons": []},
                {"sm_clock_mhz": 1500, "temperature_c": 88, "power_w": 700.0,
                 "throttle_reasons": ["sw_power_cap", "hw_thermal_slowdown"]},
                {"sm_clock_mhz": 1900, "temperature_c": 70, "power_w": "unknown",
                 "throttle_reasons": ["sw_power_cap"]}]
    summary = summarize_gpu_states(readings)
    assert summary["sm_clock_mhz"] == 1900 and summary["min_sm_clock_mhz"] == 1500
    assert summary["temperature_c"] == 88 and summary["power_w"] == 600.0
    assert summary["throttle_reasons"] == ["sw_power_cap", "hw_thermal_slowdown"]


def test_idle_and_application_clocks_are_not_throttling():
    assert throttle_reason_names(0x1 | 0x2) == ["gpu_idle", "applications_clocks_setting"]
    assert not is_throttling({"throttle_reasons": ["gpu_idle", "applications_clocks_setting"]})
    assert not is_throttling({})


def test_a_reading_nvml_refuses_is_unknown(monkeypatch):
    nvml = StandInNVML(reasons=0)

    def refuse(handle):
        raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")

    nvml.nvmlDeviceGetPowerUsage = refuse
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    assert gpu_state(0)["power_w"] == "unknown"


def test_a_verdict_names_the_runs_ranks_and_reasons_that_slowed_the_gpu():
    runs = [(1, {"throttled": False}),
            (2, {"throttled": True,
                 "gpu_state_per_rank": [{"throttle_reasons": ["sw_power_cap"]},
                                        {"throttle_reasons": ["hw_slowdown", "sw_power_cap"]}]}),
            (3, {"throttled": True,
                 "gpu_state_per_rank": [{"throttle_reasons": ["hw_thermal_slowdown"]},
                                        {"throttle_reasons": ["hw_thermal_slowdown"]}]})]
    assert throttling_note(runs) == ("the GPU was slowed down in runs 2, 3 "
                                     "(hw_slowdown on rank 1, "
                                     "hw_thermal_slowdown on ranks 0, 1)")
    one_gpu = [(4, {"throttled": True,
                    "gpu_state_during_window": {"throttle_reasons": ["sw_power_cap",
                                                                     "hw_slowdown"]}})]
    assert throttling_note(one_gpu) == "the GPU was slowed down in run 4 (hw_slowdown)"
    assert throttling_note(runs[:1]) is None


def test_provenance_names_the_container_image(monkeypatch):
    monkeypatch.setenv("NVIDIA_PYTORCH_VERSION", "24.01")
    monkeypatch.setenv("NVIDIA_BUILD_ID", "80741402")
    named = "NVIDIA_PYTORCH_VERSION=24.01, NVIDIA_BUILD_ID=80741402"
    assert environment.container_image() == named
    facts = collect_environment()
    assert facts["container"] == named
    assert facts["os"] and facts["commit"]


def test_provenance_reads_os_release(tmp_path):
    release = tmp_path / "os-release"
    release.write_text('NAME="Ubuntu"\nPRETTY_NAME="Ubuntu 22.04.4 LTS"\nID=ubuntu\n')
    assert environment.os_release(str(release)) == "Ubuntu 22.04.4 LTS"
    assert environment.os_release(str(tmp_path / "missing")) == "unknown"


def test_provenance_names_the_repository_commit_and_local_changes(tmp_path):
    import subprocess

    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    assert environment.repository_commit(tmp_path) == "unknown"  # not a git checkout
    git("init", "-q")
    (tmp_path / "suite.py").write_text("x = 1\n")
    git("add", "suite.py")
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "first")
    head = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "--short=12", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert environment.repository_commit(tmp_path) == head
    (tmp_path / "suite.py").write_text("x = 2\n")
    assert environment.repository_commit(tmp_path) == head + "-dirty"


@pytest.mark.parametrize("build, expected", [(None, "none"), ("13.0", "unknown")])
def test_a_host_without_cuda_devices_reads_none_for_a_cpu_build_and_unknown_for_a_cuda_one(
        monkeypatch, build, expected):
    """A CPU build of torch has no CUDA stack to read (`none`); a CUDA build that sees no device
    cannot say which it would use (`unknown`: a driver fault is possible)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.version, "cuda", build)
    monkeypatch.setattr(environment.shutil, "which", lambda name: None)
    found = environment.collect_environment()
    assert (found["cuda"], found["cudnn"], found["nccl"]) == (build or "none", expected, expected)
    assert found["driver"] == "none"   # no nvidia-smi on the host


def test_dalis_version_is_named_without_importing_it_and_matches_the_module(worker_env):
    done = subprocess.run([sys.executable, "-c", (
        "import sys; from rn50_model.environment import dali_version; named = dali_version(); "
        "imported = 'nvidia.dali' in sys.modules; import nvidia.dali; "
        "print(named, imported, nvidia.dali.__version__, dali_version())")],
        env=worker_env, capture_output=True, text=True, timeout=120)
    named, imported, version, again = done.stdout.split()
    assert (named, imported, again) == (version, "False", version), done.stderr
