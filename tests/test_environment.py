"""The environment a record carries: versions, hardware keys, and the GPU's state through NVML.

NVML cannot exist on these CPU machines, so its tests put a stand-in `pynvml` module in place;
the absent-library path runs for real."""
import sys
import types

import pytest

from perf_tests.verdicts import throttling_note
from rn50_model import environment
from rn50_model.environment import (collect_environment, gpu_state, hardware_key,
                                    is_throttling, throttle_reason_names)


@pytest.mark.parametrize("device, key", [
    ("NVIDIA H200", "nvidia-h200"),
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


class StandInNVML(types.ModuleType):
    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0

    def __init__(self, reasons: int) -> None:
        super().__init__("pynvml")
        self.reasons = reasons
        self.shut_down = False

    def nvmlInit(self): pass
    def nvmlShutdown(self): self.shut_down = True
    def nvmlDeviceGetHandleByIndex(self, index): return f"gpu{index}"
    def nvmlSystemGetDriverVersion(self): return b"580.159"
    def nvmlDeviceGetClockInfo(self, handle, kind): return {1: 1755, 2: 3201}[kind]
    def nvmlDeviceGetMaxClockInfo(self, handle, kind): return 1980
    def nvmlDeviceGetPowerUsage(self, handle): return 612_345
    def nvmlDeviceGetEnforcedPowerLimit(self, handle): return 700_000
    def nvmlDeviceGetTemperature(self, handle, kind): return 71
    def nvmlDeviceGetCurrentClocksEventReasons(self, handle): return self.reasons


def test_gpu_state_reads_clocks_power_temperature_and_throttle_reasons(monkeypatch):
    nvml = StandInNVML(reasons=0x4 | 0x20)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    state = gpu_state(0)
    assert state == {"driver": "580.159", "sm_clock_mhz": 1755, "max_sm_clock_mhz": 1980,
                     "memory_clock_mhz": 3201, "power_w": 612.345, "power_limit_w": 700.0,
                     "temperature_c": 71,
                     "throttle_reasons": ["sw_power_cap", "sw_thermal_slowdown"]}
    assert is_throttling(state) and nvml.shut_down


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


def test_a_verdict_is_annotated_when_the_gpu_was_throttling():
    runs = [(1, {"throttled": False}),
            (2, {"throttled": True,
                 "gpu_state_during_window": {"throttle_reasons": ["sw_power_cap"]}}),
            (3, {"throttled": True,
                 "gpu_state_during_window": {"throttle_reasons": ["hw_thermal_slowdown"]}})]
    assert throttling_note(runs) == ("the GPU was throttling in runs 2, 3 "
                                     "(hw_thermal_slowdown, sw_power_cap)")
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
