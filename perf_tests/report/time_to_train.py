"""The time-to-train section of the reports: NVIDIA's time-to-train table (time2train,
throughput, accuracy) with the gate's columns, in the terminal and in report.md with each run's
top-1 per epoch (rows of kind `time_to_train`, from results.json or tools/report.py's inputs).
"""
from __future__ import annotations

from ..detectable import detects_text
from ..text import aligned, formatted, markdown_lines, seconds_text

TABLE_COLUMNS = ("case", "GPUs", "batch/GPU", "precision", "epochs", "time2train",
                 "throughput img/s", "top-1", "target", "baseline time2train",
                 "baseline top-1", "detects", "verdict")


def table_rows(cases: dict[str, dict]) -> list[tuple[str, ...]]:
    """NVIDIA's time-to-train table (time2train, throughput, accuracy), plus the gate."""
    rows = []
    for case_id, row in sorted(cases.items()):
        time_s = row.get("time_to_train_s")
        time_text = (seconds_text(time_s) if isinstance(time_s, (int, float))
                     else "not reached" if row.get("reached_target") is False else "-")
        rows.append((
            case_id, str(row.get("nodes", 0) * row.get("gpus_per_node", 0) or "-"),
            str(row.get("batch_per_device", "-")), str(row.get("precision") or "-"),
            formatted(row.get("epochs"), "{:g}"), time_text,
            formatted(row.get("median_ips"), "{:.2f}"),
            formatted(row.get("top1"), "{:.2%}"), formatted(row.get("target_top1"), "{:.2%}"),
            formatted(row.get("baseline_time_to_train_s"), "{:,.1f} s"),
            formatted(row.get("baseline_top1"), "{:.2%}"), detects_text(row),
            str(row.get("verdict") or "-")))
    return rows


def terminal_table(cases: dict[str, dict]) -> list[str]:
    return aligned([TABLE_COLUMNS] + table_rows(cases), {0, 3, len(TABLE_COLUMNS) - 1})


def markdown_section(cases: dict[str, dict], title: str = "Time to train") -> str:
    rows = table_rows(cases)
    shown = [i for i, name in enumerate(TABLE_COLUMNS)
             if not (name.startswith("baseline") or name == "detects")
             or any(row[i] != "-" for row in rows)]
    header = tuple(TABLE_COLUMNS[i] for i in shown)
    lines = [f"## {title}", ""] + markdown_lines(
        header, [tuple(row[i] for i in shown) for row in rows],
        {n for n, name in enumerate(header) if name not in ("case", "precision", "verdict")})
    curves = [(case_id, row) for case_id, row in sorted(cases.items()) if row.get("curve")]
    for case_id, row in curves:
        lines += ["", f"### {case_id}: top-1 per epoch", "",
                  *markdown_lines(("run", "epoch", "seconds", "train loss", "top-1", "top-5",
                                   "img/s"),
                                  [(str(run), str(point["epoch"]), f"{point['seconds']:.1f}",
                                    f"{point['train_loss']:.3f}", f"{point['top1']:.2%}",
                                    f"{point['top5']:.2%}", f"{point['train_ips']:.1f}")
                                   for run, curve in enumerate(row["curve"], 1)
                                   for point in curve], set(range(7)))]
    return "\n".join(lines) + "\n"
