"""What makes a GPU unfit to measure: each NVML reading of a window and of the preflight (on the
stand-in NVML of tests/stand_in_nvml.py: none exists here), "unknown" where NVML refuses one,
each clause that marks a run or the preflight line, and the real probe of this CPU host; the
energy a window used, from NVML's energy counter at its edges, or why it is not known."""
import os
import subprocess
import sys
import time

import pynvml
import pytest
import torch

from perf_tests.baselines.checks import busy_recording_line
from perf_tests.cli.settings import Settings
from perf_tests.runs.host import HostFacts, probe_host
from perf_tests.session import session as session_module
from perf_tests.session.session import PerfSession
from rn50_model import environment, gpu_state
from rn50_model.gpu_energy import run_energy
from rn50_model.gpu_fitness import device_unfit_reasons, unfit_clauses
from rn50_model.gpu_state import GpuIdentity, GpuStateSampler, idle_gpu_state
from rn50_model.host_state import TOKEN_VARIABLE, load_reasons
from rn50_model.run_state import host_busy
from stand_in_nvml import StandInNVML

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN_PIDS = {4100, 4101}   # the run's other ranks and its torchrun agent
# What a healthy H200's window reads (the stand-in's defaults) past its clocks and power.
FACTS = {"nvml_index": 0, "max_memory_clock_mhz": 3201, "applications_clock_mhz": 1980,
         "default_applications_clock_mhz": 1980, "default_power_limit_w": 700.0,
         "persistence_mode": True, "ecc_volatile_uncorrected": 0, "row_remap_pending": False,
         "row_remap_failed": False, "pcie_max_gen": 5, "pcie_max_width": 16,
         "mig_enabled": False, "mig_enabled_after_reset": False, "other_processes": []}


@pytest.fixture(autouse=True)
def host_pid_namespace(monkeypatch):
    """NVML's pids are this process's, wherever these tests run (a CI container too)."""
    monkeypatch.setattr(gpu_state, "in_host_pid_namespace", lambda: True)


def window_state(nvml: StandInNVML, monkeypatch, own_pids=RUN_PIDS, index: int = 0) -> dict:
    """A GPU's summary of a short window, as a worker's sampler gives it."""
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    with GpuStateSampler(GpuIdentity(index=index), interval=60,
                         own_pids=lambda: own_pids) as sampler:
        pass
    return sampler.summary()


def test_a_window_records_every_fact_of_its_gpu_once(monkeypatch):
    nvml = StandInNVML(reasons=0x4)
    calls = []
    read_persistence = nvml.nvmlDeviceGetPersistenceMode

    def persistence(handle):
        calls.append(nvml.shut_down)
        return read_persistence(handle)

    nvml.nvmlDeviceGetPersistenceMode = persistence
    state = window_state(nvml, monkeypatch)
    assert {name: state[name] for name in FACTS} == FACTS
    assert (state["pcie_gen"], state["pcie_width"], state["pcie_under_load"]) == (5, 16, True)
    assert (state["sm_clock_mhz"], state["max_sm_clock_mhz"]) == (1755, 1980)
    assert (state["memory_clock_mhz"], state["max_memory_clock_mhz"]) == (3201, 3201)
    assert calls == [False]   # read once, before NVML shuts down
    assert device_unfit_reasons(state) == []   # sw_power_cap alone is no fault


def gpu_off_in_every_way() -> StandInNVML:
    return StandInNVML(reasons=0, application_clock=1410, default_power_limit=900_000, ecc=3,
                       remapped_rows=(0, 1, 1, 1), pcie_gen=3, pcie_width=8,
                       pids=[os.getpid(), 4242], mig=[1, 0])


EVERY_CLAUSE = ["SM application clock 1410 MHz of 1980 MHz default",
                "power limit 700 W of 900 W default", "PCIe gen 3 x8 of gen 5 x16",
                "1 other process (pid 4242)", "3 volatile uncorrected ECC errors",
                "row remap pending", "row remap failed", "MIG enabled"]
PCIE = "PCIe gen 3 x8 of gen 5 x16"


@pytest.mark.parametrize("call, fields, changed", [
    ("nvmlDeviceGetIndex", ["nvml_index"], {}),
    ("nvmlDeviceGetMaxClockInfo", ["max_sm_clock_mhz", "max_memory_clock_mhz"], {}),
    ("nvmlDeviceGetApplicationsClock", ["applications_clock_mhz"], {EVERY_CLAUSE[0]: None}),
    ("nvmlDeviceGetDefaultApplicationsClock", ["default_applications_clock_mhz"],
     {EVERY_CLAUSE[0]: None}),
    ("nvmlDeviceGetEnforcedPowerLimit", ["power_limit_w"], {EVERY_CLAUSE[1]: None}),
    ("nvmlDeviceGetPowerManagementDefaultLimit", ["default_power_limit_w"],
     {EVERY_CLAUSE[1]: None}),
    ("nvmlDeviceGetPersistenceMode", ["persistence_mode"], {}),
    ("nvmlDeviceGetTotalEccErrors", ["ecc_volatile_uncorrected"],   # ECC off
     {EVERY_CLAUSE[4]: None}),
    ("nvmlDeviceGetRemappedRows", ["row_remap_pending", "row_remap_failed"],
     {EVERY_CLAUSE[5]: None, EVERY_CLAUSE[6]: None}),
    ("nvmlDeviceGetCurrPcieLinkGeneration", ["pcie_gen"], {PCIE: "PCIe x8 of x16"}),
    ("nvmlDeviceGetCurrPcieLinkWidth", ["pcie_width"], {PCIE: "PCIe gen 3 of gen 5"}),
    ("nvmlDeviceGetMaxPcieLinkWidth", ["pcie_max_width"], {PCIE: "PCIe gen 3 of gen 5"}),
    ("nvmlDeviceGetComputeRunningProcesses", ["other_processes"], {EVERY_CLAUSE[3]: None}),
    ("nvmlDeviceGetMigMode", ["mig_enabled", "mig_enabled_after_reset"],
     {EVERY_CLAUSE[7]: None}),
])
def test_a_fact_nvml_does_not_support_is_unknown_and_marks_nothing(monkeypatch, call, fields,
                                                                   changed):
    """On a GPU that is off in every way, so that a reading that was guessed shows."""
    assert unfit_clauses(window_state(gpu_off_in_every_way(), monkeypatch)) == EVERY_CLAUSE
    nvml = gpu_off_in_every_way()
    nvml.refuse(call)
    state = window_state(nvml, monkeypatch)
    assert [name for name, value in state.items() if value == "unknown"] == fields
    expected = [changed.get(clause, clause) for clause in EVERY_CLAUSE]
    assert unfit_clauses(state) == [clause for clause in expected if clause]


@pytest.mark.parametrize("rows, clauses", [
    ((7, 2, 0, 0), []),                       # rows remapped since the last reset: done
    ((7, 2, 1, 0), ["row remap pending"]),    # waits for a reset
    ((7, 2, 0, 1), ["row remap failed"]),
])
def test_remapped_rows_mark_a_pending_or_failed_remap_only(monkeypatch, rows, clauses):
    assert unfit_clauses(window_state(StandInNVML(reasons=0, remapped_rows=rows),
                                      monkeypatch)) == clauses


def test_the_link_is_judged_against_what_its_slot_allows_and_the_gpus_own_maximum_kept(
        monkeypatch):
    """A gen 5 GPU in a gen 4 slot at gen 4 is how the host is built: no mark; the same slot's
    link at gen 3 is degraded."""
    nvml = StandInNVML(reasons=0, gpu_max_pcie_gen=5, max_pcie_gen=4, pcie_gen=4)
    state = window_state(nvml, monkeypatch)
    assert (state["pcie_max_gen"], state["pcie_gpu_max_gen"]) == (4, 5)
    assert unfit_clauses(state) == []
    nvml = StandInNVML(reasons=0, gpu_max_pcie_gen=5, max_pcie_gen=4, pcie_gen=3)
    assert unfit_clauses(window_state(nvml, monkeypatch)) == ["PCIe gen 3 x16 of gen 4 x16"]
    nvml.refuse("nvmlDeviceGetGpuMaxPcieLinkGeneration")   # a GPU or driver without it
    assert window_state(nvml, monkeypatch)["pcie_gpu_max_gen"] == "unknown"


HEALTHY = {**FACTS, "sm_clock_mhz": 1755, "min_sm_clock_mhz": 1740, "max_sm_clock_mhz": 1980,
           "power_limit_w": 700.0, "throttle_reasons": ["sw_power_cap"], "pcie_gen": 5,
           "pcie_width": 16, "pcie_under_load": True}


@pytest.mark.parametrize("change, clause", [
    ({"pcie_gen": 3, "pcie_width": 8}, "PCIe gen 3 x8 of gen 5 x16"),
    ({"pcie_gen": 4}, "PCIe gen 4 x16 of gen 5 x16"),
    ({"pcie_width": 8, "pcie_gen": "unknown"}, "PCIe x8 of x16"),
    ({"other_processes": [4242, 4243]}, "2 other processes (pid 4242, 4243)"),
    ({"other_processes": [4242]}, "1 other process (pid 4242)"),
    ({"power_limit_w": 400.0}, "power limit 400 W of 700 W default"),
    ({"power_limit_w": 800.0}, "power limit 800 W of 700 W default"),
    ({"ecc_volatile_uncorrected": 3}, "3 volatile uncorrected ECC errors"),
    ({"row_remap_pending": True}, "row remap pending"),
    ({"row_remap_failed": True}, "row remap failed"),
    ({"mig_enabled": True}, "MIG enabled"),
    ({"applications_clock_mhz": 1410}, "SM application clock 1410 MHz of 1980 MHz default"),
    ({"throttle_reasons": ["sw_power_cap", "hw_thermal_slowdown"], "min_sm_clock_mhz": 1500},
     "SM clock 1500 of 1980 MHz (hw_thermal_slowdown)"),
    ({"throttle_reasons": ["hw_slowdown"], "min_sm_clock_mhz": "unknown",
      "sm_clock_mhz": "unknown"}, "SM clock held back (hw_slowdown)"),
])
def test_each_thing_off_on_a_gpu_is_one_clause(change, clause):
    assert device_unfit_reasons({**HEALTHY, **change}) == [f"GPU 0: {clause}"]


@pytest.mark.parametrize("change", [
    {},
    {"persistence_mode": False},            # start-up latency, not throughput in the window
    {"throttle_reasons": ["sw_power_cap", "gpu_idle", "applications_clocks_setting"]},
    {"power_limit_w": 700.4},               # milliwatts of rounding
    {"mig_enabled_after_reset": True},      # not until the next reset
    {"row_remap_pending": "unknown", "ecc_volatile_uncorrected": "unknown",
     "other_processes": "unknown", "mig_enabled": "unknown", "pcie_gen": "unknown",
     "power_limit_w": "unknown", "applications_clock_mhz": "unknown"},
])
def test_what_is_no_fault_or_not_known_marks_nothing(change):
    assert unfit_clauses({**HEALTHY, **change}) == []


def test_an_idle_link_is_judged_by_its_width_never_its_generation():
    idle = {**HEALTHY, "pcie_under_load": False, "pcie_gen": 1}
    assert unfit_clauses(idle) == []
    assert unfit_clauses({**idle, "pcie_width": 8}) == ["PCIe x8 of x16"]
    assert unfit_clauses({**idle, "pcie_under_load": True}) == ["PCIe gen 1 x16 of gen 5 x16"]


def test_a_window_takes_the_fastest_link_it_saw(monkeypatch):
    """The first reading may come before the link left its idle generation."""
    nvml = StandInNVML(reasons=0)
    generations = iter([1, 5, 5])
    nvml.nvmlDeviceGetCurrPcieLinkGeneration = lambda handle: next(generations, 5)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    with GpuStateSampler(0, interval=0.01, own_pids=lambda: set()) as sampler:
        while len(sampler.readings) < 3:
            time.sleep(0.01)
    assert sampler.readings[0]["pcie_gen"] == 1
    assert sampler.summary()["pcie_gen"] == 5 and unfit_clauses(sampler.summary()) == []


def test_other_processes_are_those_neither_this_rank_nor_of_its_run(monkeypatch):
    nvml = StandInNVML(reasons=0, pids=[os.getpid(), 4100, 4101, 4242, 5555])
    state = window_state(nvml, monkeypatch, own_pids=RUN_PIDS)
    assert state["other_processes"] == [4242, 5555]
    assert device_unfit_reasons(state) == ["GPU 0: 2 other processes (pid 4242, 5555)"]


def test_pids_of_another_namespace_leave_other_processes_unknown(monkeypatch):
    """In a container NVML may give the host's pids: this rank, which holds a context on the
    GPU, is then missing from the list, and no pid can be told apart."""
    nvml = StandInNVML(reasons=0, pids=[91234, 91235])
    assert window_state(nvml, monkeypatch)["other_processes"] == "unknown"
    # Outside a run (the preflight) this process need hold no context: the host's namespace
    # is trusted, another is not.
    assert idle_gpu_state(GpuIdentity(index=0), set())["other_processes"] == [91234, 91235]
    monkeypatch.setattr(gpu_state, "in_host_pid_namespace", lambda: False)
    assert idle_gpu_state(GpuIdentity(index=0), set())["other_processes"] == "unknown"


def test_the_runs_own_processes_are_those_holding_its_launch_token(monkeypatch):
    """The sampler's default: host_state's processes of this run, by the launcher's token.
    Real processes, one holding the token and one not; the stand-in lists them on the GPU."""
    token = "gpu-state-test"
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    ours = subprocess.Popen(sleeper, env={**os.environ, TOKEN_VARIABLE: token})
    other = subprocess.Popen(sleeper, env={k: v for k, v in os.environ.items()
                                           if k != TOKEN_VARIABLE})
    try:
        monkeypatch.setenv(TOKEN_VARIABLE, token)
        nvml = StandInNVML(reasons=0, pids=[os.getpid(), ours.pid, other.pid])
        monkeypatch.setitem(sys.modules, "pynvml", nvml)
        with GpuStateSampler(0, interval=60) as sampler:
            pass
        assert sampler.summary()["other_processes"] == [other.pid]
    finally:
        for process in (ours, other):
            process.kill()
            process.wait()


def test_the_run_record_marks_each_ranks_gpu_beside_the_hosts_reasons(monkeypatch):
    """`host_busy` as the worker calls it, on two ranks' window states read through NVML."""
    busy_host = {"host": "vm", "node": 0, "window_s": 10.0, "cpu_count": 2, "other_cores": 0.8}
    rank0 = window_state(StandInNVML(reasons=0), monkeypatch)
    rank1 = window_state(StandInNVML(reasons=0, pcie_gen=3, pcie_width=8, ecc=2), monkeypatch,
                         index=1)
    assert host_busy([busy_host], [rank0, rank1]) == [
        "other processes used 0.8 of 2 cores",
        "GPU 1 (rank 1): PCIe gen 3 x8 of gen 5 x16",
        "GPU 1 (rank 1): 2 volatile uncorrected ECC errors"]
    assert host_busy([busy_host], [rank1]) == [
        "other processes used 0.8 of 2 cores", "GPU 1: PCIe gen 3 x8 of gen 5 x16",
        "GPU 1: 2 volatile uncorrected ECC errors"]
    assert host_busy([], [{}]) == []   # a rank without NVML


# -- energy -----------------------------------------------------------------------------------

def window_energy_of(nvml: StandInNVML, monkeypatch, index: int = 0) -> dict:
    """One rank's energy over a window, read at its edges as the worker reads it."""
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    with GpuStateSampler(GpuIdentity(index=index), interval=60,
                         own_pids=lambda: RUN_PIDS) as sampler:
        sampler.energy_at_start()
        sampler.energy_at_end()
    return sampler.energy()


def test_a_window_reads_the_energy_counter_once_at_each_edge(monkeypatch):
    nvml = StandInNVML(reasons=0)
    assert window_energy_of(nvml, monkeypatch) == {"energy_joules": 612.345, "energy_note": None}
    assert nvml.energy_readings == 2   # the sampling thread and the facts never read it


def refusing_energy(error) -> StandInNVML:
    nvml = StandInNVML(reasons=0)
    nvml.refuse("nvmlDeviceGetTotalEnergyConsumption", error)
    return nvml


@pytest.mark.parametrize("nvml, note", [
    (refusing_energy(pynvml.NVMLError_NotSupported),   # before Volta
     "NVML does not report energy on this GPU (Not Supported)"),
    (refusing_energy(pynvml.NVMLError_FunctionNotFound),   # a driver without the call
     "NVML does not report energy on this GPU (Function Not Found)"),
    (refusing_energy(pynvml.NVMLError_GpuIsLost),
     "NVML's energy counter could not be read (GPU is lost)"),
    (StandInNVML(reasons=0, energy_step_mj=-5_000),
     "NVML's energy counter went down over the window (86400000000 to 86399995000 mJ: the "
     "driver reloaded or the counter wrapped)"),
    (StandInNVML(reasons=0, energy_step_mj=0),
     "NVML's energy counter did not move over the window (86400000000 mJ)"),
    (None, "NVML unreadable (no nvidia-ml-py or no NVIDIA driver)"),   # import pynvml fails
], ids=["not-supported", "no-such-call", "gpu-lost", "went-down", "did-not-move", "no-nvml"])
def test_energy_nvml_cannot_tell_is_none_with_the_reason_never_zero(monkeypatch, nvml, note):
    assert window_energy_of(nvml, monkeypatch) == {"energy_joules": None, "energy_note": note}


def test_a_runs_energy_is_every_ranks_summed_over_all_its_images(monkeypatch):
    images = 2 * 256 * 100   # 1n2g, batch 256, 100 timed iterations
    rank0 = window_energy_of(StandInNVML(reasons=0), monkeypatch)
    rank1 = window_energy_of(StandInNVML(reasons=0, energy_step_mj=400_000), monkeypatch, 1)
    assert run_energy([rank0, rank1], images) == {
        "energy_joules": pytest.approx(1012.345), "joules_per_image": pytest.approx(
            1012.345 / images), "energy_note": None, "energy_joules_per_rank": [612.345, 400.0]}
    # One rank that cannot tell leaves the run's energy unknown, and names that rank.
    unsupported = window_energy_of(refusing_energy(pynvml.NVMLError_NotSupported), monkeypatch, 1)
    reason = "NVML does not report energy on this GPU (Not Supported)"
    assert run_energy([rank0, unsupported], images) == {
        "energy_joules": None, "joules_per_image": None, "energy_note": f"rank 1: {reason}",
        "energy_joules_per_rank": [612.345, None]}
    assert run_energy([unsupported, unsupported], images)["energy_note"] == reason


# -- the preflight ----------------------------------------------------------------------------

def idle(**changes) -> dict:
    return {**HEALTHY, "pcie_under_load": False, "pcie_gen": 1, **changes}


@pytest.mark.parametrize("preflight, line", [
    ({"gpus": [], "loadavg": [0.1, 0.2, 0.2]}, "preflight: no CUDA devices"),
    # Up to one process's worth is the session's own (pytest, the probe).
    ({"gpus": [], "loadavg": [1.4, 1.0, 0.5]}, "preflight: no CUDA devices"),
    ({"gpus": [], "loadavg": [1.7, 1.0, 0.5]},
     "preflight: no CUDA devices; load average 1.7 on 2 cores"),
    ({"gpus": [{"device": 0, **idle()}, {"device": 1, **idle(nvml_index=1)}]},
     "preflight: 2 GPUs, nothing off"),
    ({"gpus": [{"device": 0, **idle()},
               {"device": 1, **idle(nvml_index=3, power_limit_w=400.0,
                                    other_processes=[4242, 4243])}]},
     "preflight: GPU 3: power limit 400 W of 700 W default; 2 other processes (pid 4242, 4243)"),
    ({"gpus": [{"device": 0, **idle(mig_enabled=True, pcie_width=8)}],
      "loadavg": [2.0, 2.0, 2.0]},
     "preflight: load average 2.0 on 2 cores; GPU 0: PCIe x8 of x16; MIG enabled"),
    ({"gpus": [{"device": 0}, {"device": 1}]},
     "preflight: 2 GPUs, their state unknown (NVML unreadable)"),
    ({"gpus": [{"device": 2, **idle(nvml_index="unknown", ecc_volatile_uncorrected=1)}]},
     "preflight: GPU 2: 1 volatile uncorrected ECC error"),
])
def test_the_preflight_line_says_what_is_off(preflight, line):
    facts = HostFacts({"device_count": len(preflight["gpus"]), "cpu_count": 2,
                       "preflight": preflight})
    assert facts.preflight_line() == line


def test_a_probe_without_a_preflight_prints_none():
    assert HostFacts({"device_count": 0, "cpu_count": 2}).preflight_line() is None


def test_a_recording_on_a_host_the_preflight_finds_busy_says_first_what_that_costs():
    """Issue 48: what is off, that its runs will be marked and may be refused, what to do."""
    busy = HostFacts({"device_count": 1, "cpu_count": 2, "preflight": {
        "gpus": [{"device": 0, **idle(other_processes=[4242])}], "loadavg": [2.0, 2.0, 2.0]}})
    assert busy_recording_line(busy.preflight_off()) == (
        "recording baselines on a busy host (load average 2.0 on 2 cores; GPU 0: 1 other "
        "process (pid 4242)): the runs it slows are marked, run again and never recorded, and "
        "a case left short of unmarked runs is refused; wait for a quiet host, or record "
        "anyway with --perf-update-baselines=force (--perf-ignore-host-state where this load "
        "belongs in the baseline)")
    quiet = HostFacts({"device_count": 1, "cpu_count": 2, "preflight": {
        "gpus": [{"device": 0, **idle()}], "loadavg": [1.4, 1.0, 0.5]}})
    assert busy_recording_line(quiet.preflight_off()) is None
    assert HostFacts({"device_count": 0, "cpu_count": 2}).preflight_off() == []


def test_the_probe_reads_every_visible_gpu_at_rest(monkeypatch):
    """CUDA_VISIBLE_DEVICES=1,0: torch's device 0 is NVML's GPU 1, found by its UUID."""
    # Idle: no context of this probe's; 4100 is the suite's own (pytest's tree).
    nvml = StandInNVML(reasons=0, pcie_gen=1, pids=[4100, 4242])
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    monkeypatch.setattr(environment, "pids_of_this_run", lambda: {4100})
    uuids = {0: "bbbb", 1: "aaaa"}

    class Properties:
        def __init__(self, index):
            self.uuid = uuids[index]

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda device: Properties(device.index))
    found = environment.preflight()
    assert [(gpu["device"], gpu["nvml_index"]) for gpu in found["gpus"]] == [(0, 1), (1, 0)]
    assert all(gpu["pcie_under_load"] is False and gpu["pcie_gen"] == 1 for gpu in found["gpus"])
    line = HostFacts({"cpu_count": 64, "preflight": found}).preflight_line()
    assert line == "preflight: GPU 1: 1 other process (pid 4242); GPU 0: 1 other process (pid 4242)"


def test_this_cpu_hosts_real_probe_finds_no_gpu_and_no_error():
    facts = HostFacts(probe_host(REPO_ROOT))
    preflight = facts.environment["preflight"]
    assert preflight["gpus"] == []
    # The load average is this host's own business (other sessions run beside this one).
    expected = ["no CUDA devices",
                *load_reasons(preflight["loadavg"], facts.environment["cpu_count"])]
    assert facts.preflight_line() == "preflight: " + "; ".join(expected)


def test_the_session_prints_the_preflight_line_once_before_its_first_case(monkeypatch, tmp_path):
    """A session on a probe (stood in for) that found GPU 3 power-limited: the line comes as
    the first case is measured, and only then."""
    gpu = {"device": 0, **idle(nvml_index=3, power_limit_w=400.0)}
    monkeypatch.setattr(session_module, "probe_host", lambda rootdir, *stack: {
        "device_count": 0, "cpu_count": 2, "hardware": "cpu-test",
        "preflight": {"gpus": [gpu], "loadavg": [0.1, 0.1, 0.1]}})
    measured = []
    monkeypatch.setattr(session_module, "measure", lambda mode, case: measured.append(case))
    lines = []
    session = PerfSession(Settings(), tmp_path, tmp_path / "results", progress=lines.append)
    first, second = session.cases("perf_case")[:2]
    assert lines == []
    session.measure(first)
    session.measure(second)
    assert measured == [first, second]
    assert lines == ["preflight: GPU 3: power limit 400 W of 700 W default"]
