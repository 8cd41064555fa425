"""What a report reads: a session's results.json, a DLPerf-style extracted-logs JSON, a baseline
file, or the published figures that ship with the package, each as one `Source` of typed rows
(perf_tests/core/rows.py), labelled.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from perf_tests.baselines.file import BaselineError, load_baseline_file
from perf_tests.core.cases import TOPOLOGY, Case
from perf_tests.core.row_values import rows_of
from perf_tests.report.tables import Source, document_notes
from rn50_model.config import PRECISIONS
from tools.inputs import InputError, check_rows, checked_results, read_json

TIME_TO_TRAIN_FIELDS = ("time_to_train_s", "top1", "epochs", "reached_target", "target_top1",
                        "curve")


# The published figures ship with the package (pyproject.toml package data): tools/published.
PUBLISHED_DIR = Path(__file__).resolve().parent.parent / "published"


EXTRACTED_MODEL_KEY = "rn50"


SHAPES = ("a results.json (with 'cases'), an extracted-logs JSON (with 'rn50') or a baseline "
          "file (with 'entries')")


def precision_in(label: str) -> str | None:
    """The one precision a label names as a word ('ngc-fp32' -> 'fp32'), else None."""
    named = {word for word in re.split(r"[^a-z0-9]+", label.lower()) if word in PRECISIONS}
    return named.pop() if len(named) == 1 else None


def results_source(path: Path, document: dict, label: str) -> Source:
    environment = document.get("environment")
    return Source(label, rows_of(check_rows(path, document["cases"])),
                  [f"From `{path}` ({document.get('hardware', 'unknown hardware')})."]
                  + document_notes(document), hardware=document.get("hardware"),
                  environment=environment if isinstance(environment, dict) else {})


def extracted_source(path: Path, document: dict, label: str) -> Source:
    """tools/extract_logs/'s `{"rn50": {"1n8g": {...}}}` as results rows."""
    configs = document[EXTRACTED_MODEL_KEY]
    if not isinstance(configs, dict):
        raise InputError(f"input {path} has '{EXTRACTED_MODEL_KEY}' that is not an object of "
                         "<N>n<G>g configurations; regenerate it with rn50-perf "
                         "extract-logs")
    precision = precision_in(label)
    cases = {}
    for config, numbers in configs.items():
        match = TOPOLOGY.fullmatch(config)
        if not match or not isinstance(numbers, dict):
            raise InputError(f"input {path} has configuration {config!r}, not <N>n<G>g with an "
                             "object of speeds; regenerate it with rn50-perf "
                             "extract-logs")
        batch = numbers.get("batch_size_per_device")
        row = {"nodes": int(match["nodes"]), "gpus_per_node": int(match["gpus_per_node"]),
               "batch_per_device": batch, "precision": precision,
               "median_ips": numbers.get("median_speed"), "mean_ips": numbers.get("average_speed"),
               "speedup": numbers.get("speedup")}
        suffix = f"{precision}_b{batch}" if precision else f"b{batch}"
        cases[f"{config}_{suffix}"] = row
    notes = [f"Extracted from logs: `{path}`"
             + (f"; precision {precision} from the label." if precision
                else "; precision not stated (name it in --label, e.g. ngc-fp32).")]
    return Source(label, rows_of(check_rows(path, cases)), notes)


def baseline_source(path: Path, label: str, reference: bool = False) -> Source:
    """A baseline file (or published figures, which share its schema) as results rows."""
    try:
        baseline = load_baseline_file(path)
    except BaselineError as error:
        raise InputError(str(error)) from None
    cases = {}
    for case_id in baseline.entries:
        case, entry = Case.parse(case_id), baseline.entry(case_id)
        cases[case_id] = {"nodes": case.nodes, "gpus_per_node": case.gpus_per_node,
                          "batch_per_device": case.batch_per_device, "precision": case.precision,
                          "median_ips": entry.median_ips, "runs_ips": entry.runs_ips,
                          "speedup": baseline.speedup_of(case),
                          "settings": baseline.entries[case_id].get("settings") or {}}
        if case.time_to_train:
            raw = baseline.entries[case_id]
            cases[case_id].update({key: raw[key] for key in TIME_TO_TRAIN_FIELDS if key in raw})
    sources = sorted({entry.get("source") for entry in baseline.entries.values()} - {None})
    notes = [f"From `{path}` ({baseline.hardware or 'unknown hardware'})."]
    notes += [f"Source: {source}" for source in sources]
    # Entries recorded at different times may each have their own; only a shared one is the
    # file's.
    environments = {json.dumps(entry.get("environment") or {}, sort_keys=True)
                    for entry in baseline.entries.values()}
    environment = json.loads(environments.pop()) if len(environments) == 1 else {}
    return Source(label, rows_of(cases), notes, reference=reference, hardware=baseline.hardware,
                  environment=environment)


def load_source(path: Path, label: str) -> Source:
    document = read_json(path, expected=SHAPES)
    if "cases" in document:
        return results_source(path, checked_results(path, document), label)
    if "entries" in document:
        return baseline_source(path, label)
    if EXTRACTED_MODEL_KEY in document:
        return extracted_source(path, document, label)
    raise InputError(f"input {path} is none of {SHAPES}; pass one of those")


def published_names() -> list[str]:
    return sorted(path.stem for path in PUBLISHED_DIR.glob("*.json"))


def published_sources(names: str) -> list[Source]:
    sources = []
    for name in filter(None, (part.strip() for part in names.split(","))):
        path = PUBLISHED_DIR / f"{name}.json"
        if not path.is_file():
            raise InputError(f"--published {name}: no {path}; choose from "
                             f"{', '.join(published_names()) or 'none (the folder is empty)'}")
        sources.append(baseline_source(path, f"{name} (published)", reference=True))
    if not sources:
        raise InputError(f"--published {names!r} names nothing; choose from "
                         f"{', '.join(published_names())}")
    return sources


def default_label(path: Path) -> str:
    """The file name without `.json` (and extract_logs' `_result`); a results.json is named by
    its folder, the session's timestamp."""
    if path.name == "results.json" and path.parent.name:
        return path.parent.resolve().name
    return re.sub(r"_result$", "", path.stem)


def labelled(paths: list[Path], labels: list[str]) -> list[tuple[Path, str]]:
    if len(labels) > len(paths):
        raise InputError(f"{len(labels)} --label given for {len(paths)} input(s); give at most "
                         "one per input, in input order")
    chosen, seen = [], set()
    for number, path in enumerate(paths):
        label = labels[number] if number < len(labels) else default_label(path)
        base, copy = label, 1
        while label in seen:
            copy += 1
            label = f"{base} ({copy})"
        seen.add(label)
        chosen.append((path, label))
    return chosen
