"""What measuring one case gives, and the row it becomes in results.json.

Every row carries one `kind` field naming the mode that measured it (`throughput`, `ab`,
`max-batch`, `time-to-train`, `collectives`); results.json, the reports, the exports and the
promotion tool read it. Files written before the field existed get it from their one reader
(results/document.py, through core/cases.py's `row_kind`: a `_ttt` case id, a `candidate` key,
`kind` on max batch rows only).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from perf_tests.baselines.file import BaselineEntry


@dataclass(frozen=True)
class CaseResult:
    """Frozen through and through at its top: its runs and lines are tuples, its details a
    read-only mapping, so a later step amends a copy (`amended`), never the judged result."""
    case: object                 # a `Case`, or what a mode measures in its place (a search)
    kind: str
    verdict: str
    message: str
    runs_ips: Sequence[float] = ()
    details: Mapping[str, Any] = field(default_factory=dict)
    failure_tail: Sequence[str] = ()
    baseline_entry: BaselineEntry | None = None
    explanation: Sequence[str] = ()   # the operator profile's lines

    def __post_init__(self) -> None:
        for name in ("runs_ips", "failure_tail", "explanation"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        object.__setattr__(self, "details", MappingProxyType(dict(self.details)))

    @property
    def case_id(self) -> str:
        return self.case.case_id

    def amended(self, verdict: str | None = None, message: str | None = None,
                explanation: list[str] | None = None, **details) -> "CaseResult":
        """A new result: this one with what a later step (the baseline's recording, an
        operator profile, the repro command) adds; a judged result itself never changes."""
        return replace(self, verdict=verdict or self.verdict, message=message or self.message,
                       explanation=self.explanation if explanation is None else explanation,
                       details={**self.details, **details})

    def row(self, image_size: int, data_backend: str) -> dict:
        """The case's row in results.json: its layout, the session's input settings (a mode's
        details may state its own), every detail but the environment (it is in the header),
        the verdict and its line."""
        case = self.case
        row = {"kind": self.kind, "nodes": case.nodes, "gpus_per_node": case.gpus_per_node,
               "batch_per_device": case.batch_per_device, "precision": case.precision,
               "image_size": image_size, "data_backend": data_backend,
               "runs_ips": list(self.runs_ips)}
        row.update({key: value for key, value in self.details.items() if key != "environment"})
        row["verdict"] = self.verdict
        row["message"] = self.message
        if self.failure_tail:
            row["failure_tail"] = list(self.failure_tail)
        return row

