"""What a GPU is doing, through NVML: clocks, power, temperature and the reasons its clocks are
held back, read for the right physical GPU and outside the timed window.

Anything NVML cannot tell is recorded as "unknown", never guessed; without NVML (no
nvidia-ml-py, no driver) the state is empty. No torch import here: the suite's pytest process
reads the reason names too.
"""
from __future__ import annotations

import statistics
import threading
from dataclasses import dataclass

UNKNOWN = "unknown"

# NVML throttle-reason bits (nvmlClocksThrottleReasons*), named as nvidia-smi names them.
THROTTLE_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
# Reasons that mean the GPU ran slower than its baseline would have: a cooling, power-supply or
# hardware problem. Not `sw_power_cap`: an H100 or H200 at full training load sits at its power
# limit most of the time by design (the boost clock follows the power budget), so its baseline
# was measured power-capped too, and flagging it would mark nearly every run. Nor idle,
# application clocks, sync boost or display clocks, which are settings and states, not slowdowns.
SLOWDOWN_REASONS = {"hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown",
                    "hw_power_brake_slowdown"}


@dataclass(frozen=True)
class GpuIdentity:
    """Which physical GPU a torch device is, in terms NVML understands. torch's index counts
    only the devices CUDA_VISIBLE_DEVICES shows (Slurm, containers), NVML's counts them all, so
    the GPU is looked up by UUID, else PCI bus id; the index is the last resort."""
    index: int = 0
    uuid: str | None = None
    pci_bus_id: str | None = None

    @classmethod
    def of(cls, device) -> "GpuIdentity":
        import torch
        properties = torch.cuda.get_device_properties(device)
        uuid = getattr(properties, "uuid", None)
        uuid = str(uuid) if uuid is not None else None
        if uuid and not uuid.startswith("GPU-"):
            uuid = "GPU-" + uuid  # torch prints the bare UUID; NVML wants nvidia-smi's form
        bus = getattr(properties, "pci_bus_id", None)
        pci = None
        if bus is not None:
            pci = (f"{getattr(properties, 'pci_domain_id', 0):08x}:{bus:02x}:"
                   f"{getattr(properties, 'pci_device_id', 0):02x}.0")
        return cls(index=device.index or 0, uuid=uuid, pci_bus_id=pci)

    def nvml_handle(self, pynvml):
        lookups = [(pynvml.nvmlDeviceGetHandleByUUID, self.uuid),
                   (pynvml.nvmlDeviceGetHandleByPciBusId, self.pci_bus_id)]
        for lookup, key in lookups:
            if key:
                try:
                    return lookup(key.encode() if isinstance(key, str) else key)
                except Exception:
                    continue
        return pynvml.nvmlDeviceGetHandleByIndex(self.index)


def gpu_state(gpu: GpuIdentity | int = 0) -> dict:
    """Clocks, power, temperature and throttle reasons of one GPU, or {} where NVML is absent."""
    with NvmlSession(gpu) as session:
        return session.read() if session.handle is not None else {}


class NvmlSession:
    """NVML initialised and one GPU's handle looked up, until the block ends."""

    def __init__(self, gpu: GpuIdentity | int = 0) -> None:
        self.gpu = gpu if isinstance(gpu, GpuIdentity) else GpuIdentity(index=gpu)
        self.pynvml = None
        self.handle = None

    def __enter__(self) -> "NvmlSession":
        try:
            import pynvml
            pynvml.nvmlInit()
        except Exception:  # no nvidia-ml-py, or no libnvidia-ml: the state is unknown
            return self
        self.pynvml = pynvml
        try:
            self.handle = self.gpu.nvml_handle(pynvml)
        except Exception:
            self.handle = None
        return self

    def __exit__(self, *exc) -> None:
        if self.pynvml is not None:
            try:
                self.pynvml.nvmlShutdown()
            except Exception:
                pass

    def read(self) -> dict:
        pynvml, handle = self.pynvml, self.handle
        readings = {
            "driver": lambda: _text(pynvml.nvmlSystemGetDriverVersion()),
            "sm_clock_mhz": lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
            "max_sm_clock_mhz": lambda: pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM),
            "memory_clock_mhz": lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM),
            "power_w": lambda: pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
            "power_limit_w": lambda: pynvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0,
            "temperature_c": lambda: pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU),
            "throttle_reasons": lambda: throttle_reason_names(_clock_event_mask(pynvml, handle)),
        }
        state = {}
        for name, read in readings.items():
            try:
                state[name] = read()
            except Exception:
                state[name] = UNKNOWN
        return state


class GpuStateSampler:
    """The GPU's state while a timed window runs, read by a background thread.

    NVML is initialised before the window opens and shut down after it closes; the thread
    that times the window never calls it. The thread reads every `interval` seconds (and once
    at the end where the window was shorter), and `summary` folds the readings: the median
    SM clock and power, the lowest SM clock, the highest temperature, every reason seen."""

    def __init__(self, gpu: GpuIdentity | int, interval: float = 0.5) -> None:
        self.session = NvmlSession(gpu)
        self.interval = interval
        self.readings: list[dict] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gpu-state", daemon=True)

    def __enter__(self) -> "GpuStateSampler":
        self.session.__enter__()
        if self.session.handle is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._thread.is_alive():
            self._stop.set()
            self._thread.join()
            if not self.readings:
                self.readings.append(self.session.read())
        self.session.__exit__(*exc)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.readings.append(self.session.read())

    def summary(self) -> dict:
        return summarize_gpu_states(self.readings)


def summarize_gpu_states(readings: list[dict]) -> dict:
    if not readings:
        return {}

    def numbers(name):
        return [r[name] for r in readings if isinstance(r.get(name), (int, float))]

    state = dict(readings[-1])
    for name in ("sm_clock_mhz", "memory_clock_mhz", "power_w"):
        values = numbers(name)
        state[name] = statistics.median(values) if values else UNKNOWN
    clocks, temperatures = numbers("sm_clock_mhz"), numbers("temperature_c")
    state["min_sm_clock_mhz"] = min(clocks) if clocks else UNKNOWN
    state["temperature_c"] = max(temperatures) if temperatures else UNKNOWN
    seen = [reason for r in readings if isinstance(r.get("throttle_reasons"), list)
            for reason in r["throttle_reasons"]]
    state["throttle_reasons"] = [name for name in THROTTLE_REASONS.values() if name in seen]
    state["readings"] = len(readings)
    return state


def _clock_event_mask(pynvml, handle) -> int:
    # nvidia-ml-py renamed "throttle reasons" to "clock event reasons" (the bits are the same);
    # drivers before R535 lack the new call, which then raises NVMLError_FunctionNotFound.
    read_new = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
    if read_new is not None:
        try:
            return read_new(handle)
        except Exception as error:
            not_found = getattr(pynvml, "NVMLError_FunctionNotFound", ())
            if not (not_found and isinstance(error, not_found)):
                raise
    return pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle)


def throttle_reason_names(mask: int) -> list[str]:
    return [name for bit, name in THROTTLE_REASONS.items() if mask & bit]


def is_throttling(state: dict) -> bool:
    reasons = state.get("throttle_reasons")
    return isinstance(reasons, list) and bool(SLOWDOWN_REASONS.intersection(reasons))


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
