"""Peak memory and energy beside speed: each run's figures, the case's medians, the memory gate.

Speed is not the only thing an upgrade can break. A case's peak memory (`peak_memory_bytes`:
CUDA's peak allocated after warm-up, on a CPU the workers' peak resident set; the largest over
the ranks, rn50_model/timed_window.py) decides whether its batch still fits, so the case's median
over its runs is stored in the baseline entry beside its img/s, and growth beyond the memory
tolerance (`--perf-set memory-tolerance`, default 10%) is a regression however fast the case ran.
Energy per image (`joules_per_image`: NVML's energy counter over the timed window, summed over
the ranks, per image; GPUs only) is what a fleet pays: recorded and stored, not gated. A
multi-device case's interconnect (`busbw_gbps`, `gradient_allreduce_s`: the all-reduce probe its
workers make after the window, rn50_model/interconnect.py) is recorded and stored the same way;
perf_tests/judging/scaling_loss.py reads it to say where a scaling loss went.

In results.json a throughput row carries the per-run lists (`runs_peak_memory_bytes`,
`runs_joules_per_image`, `runs_busbw_gbps`, `runs_gradient_allreduce_s`, in the order of
`runs_ips`, None where a run had no figure) and their medians; an entry is made of the same runs
as its img/s (baseline_checks.recordable_runs).
"""
from __future__ import annotations

from perf_tests.baselines.entries import COVERS, MEMORY, RUN_LISTS, median_of
from perf_tests.core.text import memory_text
from perf_tests.judging.verdicts import ERROR, OOM, REGRESSION


def run_figures(records: list[dict]) -> dict:
    """The per-run lists of the ok runs' `records` (in run order), their medians, and what the
    peak memory spans; a figure no run recorded is left out."""
    figures = {}
    for name, runs_key in RUN_LISTS.items():
        values = [record.get(name) for record in records]
        if any(value is not None for value in values):
            figures[runs_key] = values
            figures[name] = median_of(values)
    covers = {record.get(COVERS) for record in records} - {None}
    if len(covers) == 1:
        figures[COVERS] = covers.pop()
    return figures


def memory_measure(covers: str | None) -> str:
    """What a peak memory figure is, in a line's words: the worker process's peak resident set
    on a CPU (rn50_model/timed_window.py: the largest rank's, whole process), the CUDA
    allocator's peak on a GPU; `covers` is the record's `peak_memory_covers`."""
    if not covers:
        return "peak memory"
    if "resident set" in covers:
        return "peak memory (RSS of the worker process, its largest rank)"
    return "peak memory (CUDA allocator's peak, its largest rank)"


def memory_growth(case_id: str, now: dict, baseline: dict, tolerance: float,
                  was: str = "baseline") -> dict:
    """The memory gate: `memory_delta` (the growth of the median peak over the entry's),
    `memory_clause` (the comparison in the line's words, within the tolerance or not: 'peak
    memory (RSS of the worker process, its largest rank) 1.31 GiB -> 1.33 GiB (+2%, tolerance
    10%)') and, where it is beyond `tolerance`, `memory_regression` with its line
    ('1n1g_fp32_b8: peak memory (...) 1.31 GiB -> 1.62 GiB (+24%, tolerance 10%)'); where the two
    cannot be compared, `memory_note` says why. `now` (entry_figures of the case's row: its
    unmarked runs, as an entry would be made of) and `baseline` (the entry, or A/B's reference
    side, named `was` in the note) hold `peak_memory_bytes` and `peak_memory_covers`."""
    before, after = baseline.get(MEMORY), now.get(MEMORY)
    if not before or not after:
        return {}
    if baseline.get(COVERS) and now.get(COVERS) and baseline[COVERS] != now[COVERS]:
        return {"memory_note": f"peak memory not compared: the {was}'s spans the "
                               f"{baseline[COVERS]}, this session's the {now[COVERS]}"}
    delta = after / before - 1
    clause = (f"{memory_figures(baseline, now)} "
              f"({growth_text(delta, tolerance)}, tolerance {tolerance:.0%})")
    judged = {"memory_delta": round(delta, 4), "baseline_peak_memory_bytes": before,
              "memory_tolerance": tolerance, "memory_clause": clause}
    if after > before * (1 + tolerance):
        judged["memory_regression"] = f"{case_id}: {clause}"
    return judged


def memory_change(old: dict, new: dict) -> str:
    """'peak memory (RSS of the worker process, its largest rank) 782 MiB -> 1.08 GiB (+41%)':
    two entries' peak memory, as a refresh's line names it beside their img/s; '' where one
    records none."""
    before, after = old.get(MEMORY), new.get(MEMORY)
    if not before or not after:
        return ""
    return f"{memory_figures(old, new)} ({after / before - 1:+.0%})"


def memory_figures(before: dict, after: dict) -> str:
    """'peak memory (RSS of the worker process, its largest rank) 782 MiB -> 1.08 GiB': what
    was measured, then the two peaks (`before`, `after`: an entry, a side or a row's figures)."""
    return (f"{memory_measure(after.get(COVERS) or before.get(COVERS))} "
            f"{memory_text(before[MEMORY], 2)} -> {memory_text(after[MEMORY], 2)}")


def growth_text(delta: float, tolerance: float) -> str:
    """'+24%'; one decimal where whole percents would read as the tolerance itself ('+10.3%'
    against 10%)."""
    whole = f"{delta:+.0%}"
    return f"{delta:+.1%}" if round(delta * 100) == round(tolerance * 100) else whole


def with_memory(case_id: str, verdict: str, message: str,
                regression: str | None) -> tuple[str, str]:
    """The case's verdict and line once its memory is judged: a memory regression makes the
    case a regression, however its throughput was judged (its line first, the throughput's
    after it), unless the case failed already (an error, out of memory); a throughput
    regression gets the memory's clause added."""
    if not regression or verdict in (ERROR, OOM):
        return verdict, message
    memory = regression.removeprefix(f"{case_id}: ")
    if verdict == REGRESSION:
        return verdict, f"{message}; {memory}"
    throughput = message.removeprefix(f"{case_id}: ")
    return REGRESSION, f"{case_id}: {memory}; throughput: {throughput}"
