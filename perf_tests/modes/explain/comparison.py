"""Two operator profiles compared (rn50_model/op_profile.py's summaries: a case's profiled run
and the one stored with its baseline entry): the operators whose per-iteration time grew most,
those new and vanished, host against device, and the lines and report.md table that say so. Pure
functions of the two summaries; the profiled run is perf_tests/modes/explain/profiling.py.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from perf_tests.core.rows import ThroughputRow
from perf_tests.core.row_values import rows_of

from rn50_model.op_profile import KEPT_OPERATORS

SHOWN_OPERATORS = 5
# Below this share of a step an operator's change is noise, and its appearing or vanishing too.
NOTABLE_SHARE = 0.005
# Under bf16 autocast on CUDA, batch norm runs torch's own kernels where fp16 (amp) gets cuDNN's:
# both GPU hours (docs/gpu.md) measured eager bf16 19-23% behind amp for that reason, and
# torch.compile closing the gap. A bf16 profile led by these says so before anything else.
NATIVE_BATCH_NORM = ("aten::native_batch_norm", "aten::native_batch_norm_backward")


@dataclass(frozen=True)
class OperatorChange:
    name: str
    before_ms: float | None  # None: not in that profile
    after_ms: float | None

    @property
    def growth(self) -> float:
        return (self.after_ms or 0.0) - (self.before_ms or 0.0)

    def text(self) -> str:
        """'aten::convolution_backward +31% (12.1 -> 15.9 ms/iter)'."""
        if self.before_ms is None:
            return f"{self.name} {ms_text(self.after_ms)} ms/iter"
        if self.after_ms is None:
            return f"{self.name} {ms_text(self.before_ms)} ms/iter"
        return (f"{self.name} {change_percent(self.before_ms, self.after_ms)} "
                f"({ms_text(self.before_ms)} -> {ms_text(self.after_ms)} ms/iter)")


@dataclass
class ProfileComparison:
    grown: list[OperatorChange]
    new: list[OperatorChange]
    vanished: list[OperatorChange]
    rows: list[OperatorChange] = field(default_factory=list)  # the report's table


def ms_text(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}" if value >= 0.1 else f"{value:.3f}"


def change_percent(before: float, after: float) -> str:
    return f"{after / before - 1:+.0%}" if before > 0 else "new"


def operator_ms(summary: dict) -> dict[str, float]:
    return {name: float(row["ms"]) for name, row in (summary.get("operators") or {}).items()}


def notable_ms(*summaries: dict) -> float:
    return NOTABLE_SHARE * max(float(summary.get("step_ms") or 0.0) for summary in summaries)


def compare(baseline: dict, current: dict, shown: int = SHOWN_OPERATORS) -> ProfileComparison:
    """The operators whose per-iteration time grew most, and those new or vanished.

    A summary keeps only its largest operators: one missing from the other side counts as new
    (or vanished) only where that side kept every operator, or it is larger than the smallest
    one that side kept.
    """
    before, after = operator_ms(baseline), operator_ms(current)
    floor = notable_ms(baseline, current)

    def absent_from(side: dict[str, float], value: float) -> bool:
        return len(side) < KEPT_OPERATORS or value > min(side.values(), default=0.0)

    both = [OperatorChange(name, before[name], after[name]) for name in after if name in before]
    grown = sorted((change for change in both if change.growth > floor),
                   key=lambda change: -change.growth)[:shown]
    new = sorted((OperatorChange(name, None, value) for name, value in after.items()
                  if name not in before and value > floor and absent_from(before, value)),
                 key=lambda change: -change.after_ms)[:shown]
    vanished = sorted((OperatorChange(name, value, None) for name, value in before.items()
                       if name not in after and value > floor and absent_from(after, value)),
                      key=lambda change: -change.before_ms)[:shown]
    top = sorted(set(after) | set(before),
                 key=lambda name: -max(after.get(name, 0.0), before.get(name, 0.0)))
    rows = [OperatorChange(name, before.get(name), after.get(name)) for name in top[:10]]
    return ProfileComparison(grown, new, vanished, rows)


def where_text(baseline: dict, current: dict) -> str:
    """Whether the time went on the host or on the device, in one clause."""
    step = f"step {ms_text(baseline.get('step_ms'))} -> {ms_text(current.get('step_ms'))} ms/iter"
    host = (f"host {ms_text(baseline.get('host_ms'))} -> {ms_text(current.get('host_ms'))} "
            f"ms/iter")
    if current.get("device_type") != "cuda" or current.get("device_ms") is None \
            or baseline.get("device_ms") is None:
        return f"on the host (a CPU run: every operator runs there): {host}, {step}"
    device = (f"device {ms_text(baseline['device_ms'])} -> {ms_text(current['device_ms'])} "
              "ms/iter")
    step_growth = float(current["step_ms"]) - float(baseline["step_ms"])
    device_growth = float(current["device_ms"]) - float(baseline["device_ms"])
    if step_growth > 0 and device_growth < step_growth / 2:
        return (f"on the host (launch-bound or host syncs: the kernels' time grew less than "
                f"the step's): {step}, {device}, {host}")
    return f"on the device: {device}, {step}, {host}"


def family_text(baseline: dict, current: dict) -> str:
    before, after = baseline.get("families") or {}, current.get("families") or {}
    changes = sorted(((name, before.get(name, 0.0), value) for name, value in after.items()),
                     key=lambda item: -(item[2] - item[1]))
    return ", ".join(f"{name} {change_percent(old, new)} ({ms_text(old)} -> {ms_text(new)})"
                     for name, old, new in changes[:4])


def communication_text(baseline: dict | None, current: dict) -> str | None:
    share = current.get("communication_share")
    if share is None:
        return None
    old = (baseline or {}).get("communication_share")
    return (f"communication {old:.0%} -> {share:.0%} of the step's operator time"
            if old is not None else f"communication {share:.0%} of the step's operator time")


def top_operators(summary: dict, shown: int = SHOWN_OPERATORS) -> list[str]:
    step = float(summary.get("step_ms") or 0.0)
    return [f"{name} {ms_text(value)} ms/iter" + (f" ({value / step:.0%} of the step)"
                                                    if step else "")
            for name, value in list(operator_ms(summary).items())[:shown]]


def native_batch_norm_note(precision: str | None, current: dict,
                           grown: list[OperatorChange] = ()) -> str | None:
    """The line a bf16 profile on CUDA gets first where torch's own batch-norm kernels are
    among its top operators or among those that grew most; None otherwise (on CPU every
    precision runs those kernels, so there they say nothing about bf16)."""
    if precision != "bf16" or current.get("device_type") != "cuda":
        return None
    times = operator_ms(current)
    leading = set(list(times)[:SHOWN_OPERATORS]) | {change.name for change in grown}
    if not leading & set(NATIVE_BATCH_NORM):
        return None
    native_ms = sum(times.get(name, 0.0) for name in NATIVE_BATCH_NORM)
    step = float(current.get("step_ms") or 0.0)
    share = f", {native_ms / step:.0%} of the step" if step else ""
    return (f"bf16: batch norm runs torch's own kernels here ({' + '.join(NATIVE_BATCH_NORM)} "
            f"{ms_text(native_ms)} ms/iter{share}), not cuDNN's as under amp: eager bf16 "
            "measured 19-23% behind amp on an H100 and an H200, and --perf-set compile=on removes "
            "the gap (docs/gpu.md)")


def explanation_lines(current: dict, baseline: dict | None, trace: Path,
                      precision: str | None = None) -> list[str]:
    """The lines the failure output gets under the verdict's line; a bf16 profile led by
    torch's own batch-norm kernels gets `native_batch_norm_note` first."""
    iterations = current.get("iterations", "?")
    comparison = compare(baseline, current) if baseline is not None else None
    note = native_batch_norm_note(precision, current, comparison.grown if comparison else [])
    lines = [note] if note else []
    if comparison is None:
        lines += [f"operator profile ({iterations} profiled iterations): the baseline entry has "
                  "no op_profile, so there is nothing to compare with (the comparison needs a "
                  "baseline recorded with one: rerun with --perf-update-baselines); the current "
                  "top operators (self time per iteration):"]
        lines += [f"  {text}" for text in top_operators(current)]
    else:
        lines += [f"operator profile ({iterations} profiled iterations) against the baseline's: "
                  "the operators whose self time per iteration grew most:"]
        lines += [f"  {change.text()}" for change in comparison.grown] or [
            "  none grew (the profiled run did not reproduce the slowdown)"]
        if comparison.new or comparison.vanished:
            parts = []
            if comparison.new:
                parts.append("new: " + "; ".join(c.text() for c in comparison.new))
            if comparison.vanished:
                parts.append("vanished: " + "; ".join(c.text() for c in comparison.vanished))
            lines.append("  " + "; ".join(parts))
        lines.append(f"  where: {where_text(baseline, current)}")
        families = family_text(baseline, current)
        if families:
            lines.append(f"  families: {families} ms/iter")
    communication = communication_text(baseline, current)
    if communication:
        lines.append(f"  {communication}")
    lines.append(f"  trace: {trace} (Perfetto or chrome://tracing)")
    return lines


def markdown_section(cases: Mapping[str, ThroughputRow | dict]) -> list[str]:
    """One table per profiled case (the throughput mode's rows): its top operators against the
    baseline's."""
    lines = []
    for case_id, row in sorted(rows_of(cases).items()):
        details = row.explain
        if not details:
            continue
        lines += ["", f"### {case_id}", ""]
        if not details.get("operators"):
            lines.append(details.get("message", "no operator profile"))
            continue
        lines += ["| operator | baseline ms/iter | current ms/iter | change |",
                  "|---|---:|---:|---:|"]
        for operator in details["operators"]:
            before, after = operator["baseline_ms"], operator["current_ms"]
            change = ("-" if before is None or after is None else change_percent(before, after))
            if before is None and details.get("baseline_op_profile"):
                change = "new"
            if after is None:
                change = "vanished"
            name = operator["operator"].replace("|", "\\|")
            lines.append(f"| `{name}` | {ms_text(before)} | {ms_text(after)} | {change} |")
        where = [line.strip() for line in details.get("lines", []) if "where:" in line]
        lines += [""] + where + ([""] if where else []) + [
            f"Trace: `{details['trace']}`; summaries: `{details['op_profile']}`"
            + (f", `{details['baseline_op_profile']}`" if details.get("baseline_op_profile")
               else " (the baseline has no op_profile)") + "."]
    if not lines:
        return []
    return ["## Operator profiles (--perf-explain)"] + lines + [""]
