"""A host's shift between sessions: how far apart its unchanged sessions' medians lie, measured by
`rn50-perf calibrate` and kept in the baseline entry it was measured against.

Within a session the runs see only that session's noise, and the auto band is built from it
(perf_tests/judging/tolerance_band.py). Some hosts also move between sessions with nothing
changed and nothing to see in their state: the 2-core VM's sessions of the smoke case ran at
33-34 img/s or at 41 (two speed levels, minutes each, no steal, no other process), and a band
of 5% from steady runs would name the next level shift a regression. The shift is how far apart
the medians of the entry and of unchanged sessions against it lie (the fastest over the slowest,
less 1): an entry and a session can each fall at either level, so a slowdown smaller than the
shift cannot be told from the host. An auto band
is never narrower than the entry's shift, and its line says so. An entry keeps its shift when a
refresh replaces it (perf_tests/baselines/lineage.py): it describes the host, not the software.

    "host_shift": {"fraction": 0.218, "sessions": 10, "measured_at": "2026-11-28T12:40:00Z"}
"""
from __future__ import annotations

from perf_tests.core.text import utc_now

HOST_SHIFT = "host_shift"
MOST = 0.99


def measured_shift(baseline_median: float, session_medians: list[float]) -> dict:
    """The entry's `host_shift` from its median and the medians of unchanged sessions against
    it (below 1: a host twice as fast in one session as in another is beyond any band)."""
    medians = [baseline_median, *session_medians]
    fraction = min(MOST, max(medians) / min(medians) - 1)
    return {"fraction": round(fraction, 4), "sessions": len(session_medians),
            "measured_at": utc_now()}


def shift_fraction(shift: dict | None) -> float:
    """The shift as a fraction; 0 for an entry without one."""
    return float(shift["fraction"]) if shift else 0.0


def host_shift_problem(shift) -> str | None:
    """Why a stored host_shift cannot be read (a baseline file's check), else None."""
    if shift is None:
        return None
    fraction, sessions = (shift.get("fraction"), shift.get("sessions")) \
        if isinstance(shift, dict) else (None, None)
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) \
            or not 0 <= fraction < 1:
        return "has no fraction between 0 and 1"
    if isinstance(sessions, bool) or not isinstance(sessions, int) or sessions < 1:
        return "has no count of sessions (1 or more)"
    return None
