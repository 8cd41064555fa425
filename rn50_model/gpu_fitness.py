"""Whether a GPU's state fits a measurement: the throttle reasons NVML gives and those that slow a
run down, and the clauses the suite names for a GPU that is off (a clock held back, a power limit
away from its default, other processes, ECC errors, a PCIe link below its slot's, MIG)."""
from __future__ import annotations

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




def throttle_reason_names(mask: int) -> list[str]:
    return [name for bit, name in THROTTLE_REASONS.items() if mask & bit]


def is_throttling(state: dict) -> bool:
    reasons = state.get("throttle_reasons")
    return isinstance(reasons, list) and bool(SLOWDOWN_REASONS.intersection(reasons))


def gpu_name(state: dict, fallback: str = "the GPU") -> str:
    """`GPU 3`, NVML's (and nvidia-smi's) number of the physical GPU."""
    index = state.get("nvml_index")
    return f"GPU {index}" if _known(index) else fallback


def unfit_clauses(state: dict) -> list[str]:
    """What is off on one GPU, one clause each ("power limit 400 W of 700 W default"); empty
    where nothing is, or nothing is known. A state read during a window (`pcie_under_load`)
    has its PCIe generation judged; an idle one (the preflight's) does not, as an idle link
    runs at a low generation to save power and says nothing about what it can do.

    Persistence mode off is recorded but is no fault: it costs the driver's start-up when a
    process opens the GPU, before the window, not throughput within it."""
    clauses = []
    if is_throttling(state):
        reasons = ", ".join(reason for reason in state["throttle_reasons"]
                            if reason in SLOWDOWN_REASONS)
        clock = next((state.get(name) for name in ("min_sm_clock_mhz", "sm_clock_mhz")
                      if _known(state.get(name))), None)
        top = state.get("max_sm_clock_mhz")
        clauses.append(f"SM clock {clock:.0f} of {top:.0f} MHz ({reasons})"
                       if clock is not None and _known(top) else f"SM clock held back ({reasons})")
    application, default = state.get("applications_clock_mhz"), state.get(
        "default_applications_clock_mhz")
    if _known(application) and _known(default) and application != default:
        clauses.append(f"SM application clock {application} MHz of {default} MHz default")
    limit, default = state.get("power_limit_w"), state.get("default_power_limit_w")
    if _known(limit) and _known(default) and abs(limit - default) >= 1.0:
        clauses.append(f"power limit {limit:.0f} W of {default:.0f} W default")
    pcie = pcie_clause(state)
    if pcie:
        clauses.append(pcie)
    others = state.get("other_processes")
    if isinstance(others, list) and others:
        clauses.append(f"{_count(len(others), 'other process', 'other processes')} "
                       f"(pid {', '.join(map(str, others))})")
    errors = state.get("ecc_volatile_uncorrected")
    if _known(errors) and errors > 0:
        clauses.append(_count(errors, "volatile uncorrected ECC error",
                              "volatile uncorrected ECC errors"))
    if state.get("row_remap_pending") is True:
        clauses.append("row remap pending")
    if state.get("row_remap_failed") is True:
        clauses.append("row remap failed")
    if state.get("mig_enabled") is True:
        clauses.append("MIG enabled")
    return clauses


def pcie_clause(state: dict) -> str | None:
    """`PCIe gen 3 x8 of gen 5 x16` where the link runs below what it can; the generation only
    where it was read under load (see unfit_clauses)."""
    gen, max_gen = state.get("pcie_gen"), state.get("pcie_max_gen")
    width, max_width = state.get("pcie_width"), state.get("pcie_max_width")
    gen_judged = state.get("pcie_under_load") is True and _known(gen) and _known(max_gen)
    width_judged = _known(width) and _known(max_width)
    if not ((gen_judged and gen < max_gen) or (width_judged and width < max_width)):
        return None
    now = ([f"gen {gen}"] if gen_judged else []) + ([f"x{width}"] if width_judged else [])
    best = ([f"gen {max_gen}"] if gen_judged else []) + ([f"x{max_width}"] if width_judged else [])
    return f"PCIe {' '.join(now)} of {' '.join(best)}"


def device_unfit_reasons(state: dict, name: str | None = None) -> list[str]:
    """`GPU 0: PCIe gen 3 x8 of gen 5 x16`: each clause of `unfit_clauses` with the GPU's name."""
    name = name or gpu_name(state)
    return [f"{name}: {clause}" for clause in unfit_clauses(state)]


def ranks_unfit_reasons(states: list[dict]) -> list[str]:
    """Every rank's GPU's clauses, in rank order, the rank named where there are several
    (`GPU 3 (rank 1): 2 other processes (pid 4242, 4243)`)."""
    several = len(states) > 1
    return [reason for rank, state in enumerate(states)
            for reason in device_unfit_reasons(
                state, f"{gpu_name(state)} (rank {rank})" if several else None)]


def _known(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _count(number: int, one: str, several: str) -> str:
    return f"{number} {one if number == 1 else several}"


def state_text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
