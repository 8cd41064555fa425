"""A stand-in for nvidia-ml-py's `pynvml` module, for the tests of the NVML readings: NVML cannot
exist on these CPU machines. It answers as two healthy H200s would and uses nvidia-ml-py's own
constants and error classes (importing them needs no driver).

    monkeypatch.setitem(sys.modules, "pynvml", StandInNVML(reasons=0, pcie_gen=3))
"""
from __future__ import annotations

import os
import types

import pynvml as nvidia_ml_py


class Process:
    """What nvmlDeviceGetComputeRunningProcesses lists: objects with a `pid`."""
    def __init__(self, pid: int) -> None:
        self.pid, self.usedGpuMemory = pid, 1 << 30


class StandInNVML(types.ModuleType):
    """The slice of nvidia-ml-py the suite calls, over two healthy H200s that NVML numbers 0
    and 1, this process holding a context on each, their energy counters advancing with every
    reading; nvidia-ml-py's own constants and error classes. `refuse(name)` makes a call raise
    NVMLError_NotSupported."""
    NVML_CLOCK_SM, NVML_CLOCK_MEM = nvidia_ml_py.NVML_CLOCK_SM, nvidia_ml_py.NVML_CLOCK_MEM
    NVML_TEMPERATURE_GPU = nvidia_ml_py.NVML_TEMPERATURE_GPU
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = nvidia_ml_py.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    NVML_VOLATILE_ECC = nvidia_ml_py.NVML_VOLATILE_ECC
    NVML_FEATURE_ENABLED = nvidia_ml_py.NVML_FEATURE_ENABLED
    NVML_DEVICE_MIG_ENABLE = nvidia_ml_py.NVML_DEVICE_MIG_ENABLE
    NVMLError_FunctionNotFound = nvidia_ml_py.NVMLError_FunctionNotFound
    NVMLError_NotSupported = nvidia_ml_py.NVMLError_NotSupported
    UUIDS = {b"GPU-aaaa": "gpu0", b"GPU-bbbb": "gpu1"}
    BUS_IDS = {b"00000000:3b:00.0": "gpu0", b"00000000:86:00.0": "gpu1"}

    def __init__(self, reasons: int, new_reasons_call: bool = True, **changes) -> None:
        super().__init__("pynvml")
        self.reasons = reasons
        self.initialised = 0
        self.shut_down = False
        self.gpu = {"application_clock": 1980, "default_power_limit": 700_000, "persistence": 1,
                    "ecc": 0, "remapped_rows": (0, 0, 0, 0), "pcie_gen": 5, "pcie_width": 16,
                    "gpu_max_pcie_gen": 5, "max_pcie_gen": 5, "max_pcie_width": 16,
                    "pids": [os.getpid()], "mig": [0, 0], "energy_mj": 86_400_000_000,
                    "energy_step_mj": 612_345, **changes}
        self.energy_readings = 0
        if not new_reasons_call:  # a driver before R535: the call exists, the driver lacks it
            self.refuse("nvmlDeviceGetCurrentClocksEventReasons",
                        nvidia_ml_py.NVMLError_FunctionNotFound)

    def refuse(self, name: str, error=nvidia_ml_py.NVMLError_NotSupported) -> None:
        def refused(*args):
            raise error()
        setattr(self, name, refused)

    def nvmlInit(self): self.initialised += 1
    def nvmlShutdown(self): self.shut_down = True
    def nvmlDeviceGetHandleByIndex(self, index): return f"gpu{index}"
    def nvmlDeviceGetHandleByUUID(self, uuid): return self.UUIDS[uuid]
    def nvmlDeviceGetHandleByPciBusId(self, bus): return self.BUS_IDS[bus]
    def nvmlSystemGetDriverVersion(self): return b"580.159"
    def nvmlDeviceGetClockInfo(self, handle, kind): return {1: 1755, 2: 3201}[kind]
    def nvmlDeviceGetMaxClockInfo(self, handle, kind): return {1: 1980, 2: 3201}[kind]
    def nvmlDeviceGetPowerUsage(self, handle): return 612_345 if handle == "gpu0" else 400_000
    def nvmlDeviceGetEnforcedPowerLimit(self, handle): return 700_000
    def nvmlDeviceGetTemperature(self, handle, kind): return 71
    def nvmlDeviceGetCurrentClocksEventReasons(self, handle): return self.reasons
    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle): return self.reasons
    def nvmlDeviceGetIndex(self, handle): return int(handle[-1])
    def nvmlDeviceGetApplicationsClock(self, handle, kind): return self.gpu["application_clock"]
    def nvmlDeviceGetDefaultApplicationsClock(self, handle, kind): return 1980
    def nvmlDeviceGetPowerManagementDefaultLimit(self, handle):
        return self.gpu["default_power_limit"]
    def nvmlDeviceGetPersistenceMode(self, handle): return self.gpu["persistence"]
    def nvmlDeviceGetTotalEccErrors(self, handle, error_type, counter):
        assert (error_type, counter) == (1, 0)  # uncorrected, volatile
        return self.gpu["ecc"]
    def nvmlDeviceGetRemappedRows(self, handle): return self.gpu["remapped_rows"]
    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle): return self.gpu["pcie_gen"]
    def nvmlDeviceGetCurrPcieLinkWidth(self, handle): return self.gpu["pcie_width"]
    def nvmlDeviceGetGpuMaxPcieLinkGeneration(self, handle): return self.gpu["gpu_max_pcie_gen"]
    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle): return self.gpu["max_pcie_gen"]
    def nvmlDeviceGetMaxPcieLinkWidth(self, handle): return self.gpu["max_pcie_width"]
    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return [Process(pid) for pid in self.gpu["pids"]]
    def nvmlDeviceGetMigMode(self, handle): return self.gpu["mig"]
    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        """Millijoules since the driver loaded (a day at 1 kW), each reading `energy_step_mj`
        past the one before (a second at 612 W: a window)."""
        self.energy_readings += 1
        return self.gpu["energy_mj"] + (self.energy_readings - 1) * self.gpu["energy_step_mj"]
