"""What a GPU is doing, through NVML: clocks, power, temperature and the reasons its clocks are
held back, read for the right physical GPU and outside the timed window, and NVML's total energy
counter at the window's edges (gpu_energy.py makes the window's figures of it). What makes a GPU
unfit to measure, and the clauses that say so, is gpu_fitness.py.

Anything NVML cannot tell is recorded as "unknown", never guessed, and no read raises; without
NVML (no nvidia-ml-py, no driver) the state is empty. No torch import here: the suite's pytest
process reads the reason names and the clauses too.
"""
from __future__ import annotations

import os
import statistics
import threading
from collections.abc import Callable
from dataclasses import dataclass

from .gpu_energy import no_energy, window_energy
from .gpu_fitness import THROTTLE_REASONS, state_text, throttle_reason_names
from .host_state import pids_of_this_run, quietly

UNKNOWN = "unknown"

# /proc/self/ns/pid of a process in the host's own PID namespace (the kernel's
# PROC_PID_INIT_INO); in another one (a container's) NVML may number processes differently.
HOST_PID_NAMESPACE = "pid:[4026531836]"


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


def idle_gpu_state(gpu: GpuIdentity, own_pids: set[int]) -> dict:
    """One GPU's state outside any run (the session's preflight): a reading and its facts, or {}
    where NVML is absent. Its PCIe generation is an idle one, which no clause judges."""
    with NvmlSession(gpu) as session:
        if session.handle is None:
            return {}
        return {**session.read(), **session.read_facts(own_pids, holds_context=False),
                "pcie_under_load": False}


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
        """What changes while a window runs: one sample. The PCIe link's generation is read here,
        with the device busy: a link drops to a low generation at idle to save power, so only a
        reading under load says what the link can do."""
        pynvml, handle = self.pynvml, self.handle
        return read_each({
            "driver": lambda: state_text(pynvml.nvmlSystemGetDriverVersion()),
            "sm_clock_mhz": lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
            "max_sm_clock_mhz":
                lambda: pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM),
            "memory_clock_mhz":
                lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM),
            "power_w": lambda: pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
            "power_limit_w": lambda: pynvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0,
            "temperature_c":
                lambda: pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU),
            "throttle_reasons": lambda: throttle_reason_names(_newer_call(
                pynvml, "nvmlDeviceGetCurrentClocksEventReasons",
                "nvmlDeviceGetCurrentClocksThrottleReasons", handle)),
            "pcie_gen": lambda: pynvml.nvmlDeviceGetCurrPcieLinkGeneration(handle),
            "pcie_width": lambda: pynvml.nvmlDeviceGetCurrPcieLinkWidth(handle),
        })

    def read_facts(self, own_pids: set[int], holds_context: bool) -> dict:
        """What stays put while a run lasts, read once: right after a window, and by the
        preflight. `own_pids`: the run's (or the suite's) processes, which are not "other";
        `holds_context`: whether this process has a context on the GPU (a worker does)."""
        pynvml, handle = self.pynvml, self.handle

        def remapped_rows(field: int) -> bool:
            # (corrected rows, uncorrected rows, remap pending, remap failed)
            return bool(pynvml.nvmlDeviceGetRemappedRows(handle)[field])

        def mig_mode(field: int) -> bool:
            return pynvml.nvmlDeviceGetMigMode(handle)[field] == pynvml.NVML_DEVICE_MIG_ENABLE

        return read_each({
            "nvml_index": lambda: pynvml.nvmlDeviceGetIndex(handle),
            "max_memory_clock_mhz": lambda: pynvml.nvmlDeviceGetMaxClockInfo(
                handle, pynvml.NVML_CLOCK_MEM),
            "applications_clock_mhz": lambda: pynvml.nvmlDeviceGetApplicationsClock(
                handle, pynvml.NVML_CLOCK_SM),
            "default_applications_clock_mhz": lambda: pynvml.nvmlDeviceGetDefaultApplicationsClock(
                handle, pynvml.NVML_CLOCK_SM),
            "default_power_limit_w": lambda: pynvml.nvmlDeviceGetPowerManagementDefaultLimit(
                handle) / 1000.0,
            "persistence_mode": lambda: pynvml.nvmlDeviceGetPersistenceMode(
                handle) == pynvml.NVML_FEATURE_ENABLED,
            "ecc_volatile_uncorrected": lambda: pynvml.nvmlDeviceGetTotalEccErrors(
                handle, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC),
            "row_remap_pending": lambda: remapped_rows(2),
            "row_remap_failed": lambda: remapped_rows(3),
            # What the link can run at in this slot (the lower of the GPU's maximum and the
            # slot's), which a degraded link falls below; the GPU's own maximum is recorded
            # beside it: a gen 5 GPU in a gen 4 slot is how the host is built, not a fault.
            "pcie_max_gen": lambda: pynvml.nvmlDeviceGetMaxPcieLinkGeneration(handle),
            "pcie_gpu_max_gen": lambda: pynvml.nvmlDeviceGetGpuMaxPcieLinkGeneration(handle),
            "pcie_max_width": lambda: pynvml.nvmlDeviceGetMaxPcieLinkWidth(handle),
            "mig_enabled": lambda: mig_mode(0),
            "mig_enabled_after_reset": lambda: mig_mode(1),
            "other_processes": lambda: other_processes(pynvml, handle, own_pids, holds_context),
        })


class GpuStateSampler:
    """The GPU's state while a timed window runs, read by a background thread.

    NVML is initialised before the window opens and shut down after it closes. The thread
    reads every `interval` seconds (and once at the end where the window was shorter), and
    `summary` folds the readings: the median SM clock and power, the lowest SM clock, the
    highest temperature, every reason seen, the fastest PCIe link seen. The facts that stay put
    are read once, as the window closes. The thread that times the window makes one NVML call
    at each edge, outside the span it times: the energy counter (`energy_at_start`,
    `energy_at_end`, `energy`)."""

    def __init__(self, gpu: GpuIdentity | int, interval: float = 0.5,
                 own_pids: Callable[[], set[int]] = pids_of_this_run) -> None:
        self.session = NvmlSession(gpu)
        self.interval = interval
        self.own_pids = own_pids
        self.readings: list[dict] = []
        self.facts: dict = {}
        # NVML's energy counter at the window's edges (millijoules), or why it was not read.
        self._energy_start_mj: int | str | None = None
        self._energy_end_mj: int | str | None = None
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
            self.facts = self.session.read_facts(quietly(self.own_pids) or set(),
                                                 holds_context=True)
        self.session.__exit__(*exc)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.readings.append(self.session.read())

    def summary(self) -> dict:
        """The window's readings folded, with the facts read after it; {} without NVML."""
        if not self.readings:
            return {}
        return {**summarize_gpu_states(self.readings), **self.facts, "pcie_under_load": True}

    def energy_at_start(self) -> None:
        """As the window opens, after the barrier: the energy counter, one NVML call."""
        self._energy_start_mj = energy_counter_mj(self.session)

    def energy_at_end(self) -> None:
        """As the window closes, after its synchronize: the energy counter, one NVML call."""
        self._energy_end_mj = energy_counter_mj(self.session)

    def energy(self) -> dict:
        """This GPU's energy over the window (`window_energy`)."""
        if self._energy_start_mj is None or self._energy_end_mj is None:
            return no_energy("the window's edges were not both read")
        return window_energy(self._energy_start_mj, self._energy_end_mj)


class NoGpuState:
    """The GPU state reader of a CPU run: nothing to read."""

    def __enter__(self) -> "NoGpuState":
        return self

    def __exit__(self, *exc) -> None:
        pass

    def summary(self) -> dict:
        return {}

    def energy_at_start(self) -> None:
        pass

    def energy_at_end(self) -> None:
        pass

    def energy(self) -> dict:
        return no_energy("no CUDA device")


def gpu_state_sampler(device) -> GpuStateSampler | NoGpuState:
    """The state reader of a torch `device` while a timed window runs: this GPU's, read through
    NVML from another thread; nothing on a CPU."""
    if device.type != "cuda":
        return NoGpuState()
    return GpuStateSampler(GpuIdentity.of(device))










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
    # The fastest link seen: a reading taken as the window opened may still be the idle one.
    for name in ("pcie_gen", "pcie_width"):
        values = numbers(name)
        state[name] = max(values) if values else UNKNOWN
    seen = [reason for r in readings if isinstance(r.get("throttle_reasons"), list)
            for reason in r["throttle_reasons"]]
    state["throttle_reasons"] = [name for name in THROTTLE_REASONS.values() if name in seen]
    state["readings"] = len(readings)
    return state


def read_each(readings: dict[str, Callable[[], object]]) -> dict:
    """Each reading's value, or "unknown" where it fails (not supported by this GPU or driver,
    not permitted, no such call): no reading raises."""
    state = {}
    for name, read in readings.items():
        try:
            state[name] = read()
        except Exception:
            state[name] = UNKNOWN
    return state


def _newer_call(pynvml, newer: str, older: str, *args):
    """`newer(*args)`, else `older(*args)` where this nvidia-ml-py or driver lacks the newer
    call or the GPU does not support it. nvidia-ml-py renamed "throttle reasons" to "clock event
    reasons" (the bits are the same), and drivers before R535 lack the new call; the GPU's own
    PCIe maximum came after the device-and-slot one."""
    read_new = getattr(pynvml, newer, None)
    if read_new is not None:
        try:
            return read_new(*args)
        except Exception as error:
            fallbacks = tuple(getattr(pynvml, name) for name in
                              ("NVMLError_FunctionNotFound", "NVMLError_NotSupported")
                              if hasattr(pynvml, name))
            if not isinstance(error, fallbacks):
                raise
    return getattr(pynvml, older)(*args)


def other_processes(pynvml, handle, own_pids: set[int], holds_context: bool) -> list[int]:
    """The pids of the compute processes on this GPU that are neither this one nor in
    `own_pids`. NVML numbers them in the host's PID namespace: where this process is not among
    them though it holds a context on the GPU, or might be numbered otherwise (a container's
    namespace), none can be told from ours, and this raises (the reading is "unknown")."""
    pids = {process.pid for process in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)}
    if os.getpid() not in pids and (holds_context or not in_host_pid_namespace()):
        raise LookupError("NVML's process ids cannot be compared with this namespace's")
    return sorted(pids - own_pids - {os.getpid()})


def in_host_pid_namespace() -> bool:
    try:
        return os.readlink("/proc/self/ns/pid") == HOST_PID_NAMESPACE
    except OSError:
        return False


def energy_counter_mj(session: NvmlSession) -> int | str:
    """NVML's total energy counter of the session's GPU, in millijoules since the driver loaded
    (`nvmlDeviceGetTotalEnergyConsumption`, Volta and newer), or why it cannot be read."""
    pynvml = session.pynvml
    if pynvml is None:
        return "NVML unreadable (no nvidia-ml-py or no NVIDIA driver)"
    if session.handle is None:
        return "NVML found no handle for this GPU"
    try:
        return int(pynvml.nvmlDeviceGetTotalEnergyConsumption(session.handle))
    except Exception as error:
        unsupported = tuple(getattr(pynvml, name) for name in
                            ("NVMLError_NotSupported", "NVMLError_FunctionNotFound")
                            if hasattr(pynvml, name))
        if isinstance(error, unsupported):
            return f"NVML does not report energy on this GPU ({error})"
        return f"NVML's energy counter could not be read ({error or type(error).__name__})"
