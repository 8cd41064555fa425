"""The energy a run's timed window took, from NVML's energy counter: per rank, then per image
over the ranks; null, never 0, where a rank's counter is unknown, with why."""
from __future__ import annotations


def no_energy(reason: str) -> dict:
    """A rank's energy where it cannot be told: None, never 0, and why."""
    return {"energy_joules": None, "energy_note": reason}


def window_energy(start_mj: int | str, end_mj: int | str) -> dict:
    """`energy_joules` between two readings of the counter, or None with `energy_note`: a reading
    that failed, a counter that went down (the driver reloaded, or it wrapped) or did not move
    (a window shorter than the counter's updates: 0 J would be a guess)."""
    for reading in (start_mj, end_mj):
        if isinstance(reading, str):
            return no_energy(reading)
    if end_mj < start_mj:
        return no_energy(f"NVML's energy counter went down over the window ({start_mj} to "
                         f"{end_mj} mJ: the driver reloaded or the counter wrapped)")
    if end_mj == start_mj:
        return no_energy(f"NVML's energy counter did not move over the window ({start_mj} mJ)")
    return {"energy_joules": (end_mj - start_mj) / 1000.0, "energy_note": None}


def run_energy(per_rank: list[dict], timed_images: int) -> dict:
    """The run's energy from every rank's (`window_energy`): `energy_joules`, the sum over the
    ranks, and `joules_per_image` over the run's timed images on all of them; both None where
    any rank's is unknown, `energy_note` saying why (naming the ranks unless all say the
    same); `energy_joules_per_rank` in rank order."""
    joules = [rank.get("energy_joules") for rank in per_rank]
    record = {"energy_joules": None, "joules_per_image": None, "energy_note": None,
              "energy_joules_per_rank": joules}
    if not per_rank:
        return {**record, "energy_note": "no rank read its GPU's energy"}
    missing = {rank: state.get("energy_note") or "unknown" for rank, state in enumerate(per_rank)
               if state.get("energy_joules") is None}
    if missing:
        notes = set(missing.values())
        every_rank_alike = len(notes) == 1 and len(missing) == len(per_rank)
        record["energy_note"] = notes.pop() if every_rank_alike else "; ".join(
            f"rank {rank}: {note}" for rank, note in missing.items())
        return record
    total = sum(joules)
    return {**record, "energy_joules": total, "joules_per_image": total / timed_images}
