"""A pytest plugin that says, for each test, its wall time and the CPU time the whole host spent
meanwhile (/proc/stat's busy ticks over its setup, call and teardown): run the tests one at a
time (no -n) on an otherwise idle host, and the host's CPU is the test's, its fork servers,
daemons and containers included, which no process's own accounting sees. A test whose CPU is a
small share of its wall time waits idle (a timeout, a sleep): `make test` runs those, marked
`idle_wait`, beside the two workers instead of on one of them (docs/development.md).

    PYTHONPATH=tests python3 -m pytest -p cpu_per_test -p no:cacheprovider \\
        tests/test_faults.py::test_a_hung_rank_ends_at_the_timeout_and_nothing_is_left ...

One JSON line a test goes to the file CPU_PER_TEST_OUT names (default cpu-per-test.jsonl in the
current folder): {"test": nodeid, "wall_s": ..., "cpu_s": ...}; the terminal summary lists them,
the lowest share of CPU first.
"""
from __future__ import annotations

import json
import os
import time

import pytest

OUT_VARIABLE = "CPU_PER_TEST_OUT"
TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")
measured: list[dict] = []


def busy_seconds() -> float:
    """The host's CPU time since boot, all cores, less idle and I/O wait."""
    with open("/proc/stat") as handle:
        ticks = [int(value) for value in handle.readline().split()[1:9]]
    return (sum(ticks) - ticks[3] - ticks[4]) / TICKS_PER_SECOND


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    started, busy = time.monotonic(), busy_seconds()
    yield
    row = {"test": item.nodeid, "wall_s": round(time.monotonic() - started, 2),
           "cpu_s": round(busy_seconds() - busy, 2)}
    measured.append(row)
    with open(os.environ.get(OUT_VARIABLE, "cpu-per-test.jsonl"), "a") as out:
        out.write(json.dumps(row) + "\n")


def pytest_terminal_summary(terminalreporter):
    if not measured:
        return
    terminalreporter.section("CPU per test (the whole host's, over its wall time)")
    for row in sorted(measured, key=lambda row: row["cpu_s"] / max(row["wall_s"], 0.01)):
        share = row["cpu_s"] / max(row["wall_s"], 0.01)
        terminalreporter.write_line(f"{row['wall_s']:7.1f} s wall {row['cpu_s']:7.1f} s CPU "
                                    f"{share:5.2f} cores  {row['test']}")
