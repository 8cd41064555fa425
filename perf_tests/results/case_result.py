"""What measuring one case gives: its typed row (perf_tests/core/rows.py), built as its mode
judges it, and what the session keeps beside the row (the environment, the baseline entry it was
judged against, an operator profile's lines).

A mode builds its result with `CaseResult.judged`: every field it writes must be declared by its
kind's row type, or building the row fails there, naming the field. A later step (the baseline's
recording, an operator profile, the repro command) adds declared fields with `amended`.
`row_dict` is the case's row in results.json. Every row carries one `kind` field naming the mode
that measured it (`throughput`, `ab`, `max-batch`, `time-to-train`, `collectives`); results.json,
the reports, the exports and the promotion tool read it. Files written before the field existed
get it from their one reader (results/document.py, through core/cases.py's `row_kind`: a `_ttt`
case id, a `candidate` key, `kind` on max batch rows only).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from perf_tests.baselines.file import BaselineEntry
from perf_tests.core.rows import EMPTY, Row
from perf_tests.core.row_values import amended_row, new_row


@dataclass(frozen=True)
class CaseResult:
    """Frozen through and through at its top: its row is frozen, its environment read-only, so a
    later step amends a copy (`amended`), never the judged result. The verdict, its line and the
    runs are the row's."""
    case: object                 # a `Case`, or what a mode measures in its place (a search)
    row: Row
    # the runs' environment: results.json's header holds it, not the row
    environment: Mapping[str, Any] = field(default_factory=lambda: EMPTY)
    baseline_entry: BaselineEntry | None = None
    explanation: Sequence[str] = ()   # the operator profile's lines

    @classmethod
    def judged(cls, case, kind: str, verdict: str, message: str, *,
               image_size: int | None = None, data_backend: str | None = None,
               runs_ips: Sequence[float] = (), failure_tail: Sequence[str] = (),
               environment: Mapping[str, Any] | None = None,
               baseline_entry: BaselineEntry | None = None, explanation: Sequence[str] = (),
               **fields: Any) -> "CaseResult":
        """A mode's result: the case's layout, the session's input settings (`fields` may state
        the mode's own), its runs, `fields` (each declared by `kind`'s row type, else a
        TypeError names it), the verdict and its line."""
        row = {"nodes": case.nodes, "gpus_per_node": case.gpus_per_node,
               "batch_per_device": case.batch_per_device, "precision": case.precision,
               "image_size": image_size, "data_backend": data_backend,
               "runs_ips": list(runs_ips), **fields, "verdict": verdict, "message": message}
        if failure_tail:
            row["failure_tail"] = list(failure_tail)
        return cls(case, new_row(kind, case.case_id, **row),
                   MappingProxyType(dict(environment or {})), baseline_entry, tuple(explanation))

    @property
    def case_id(self) -> str:
        return self.case.case_id

    @property
    def kind(self) -> str:
        return self.row.kind

    @property
    def verdict(self) -> str:
        return self.row.verdict

    @property
    def message(self) -> str:
        return self.row.message

    @property
    def runs_ips(self) -> tuple[float, ...]:
        return self.row.runs_ips

    @property
    def failure_tail(self) -> tuple[str, ...]:
        return self.row.failure_tail

    def amended(self, verdict: str | None = None, message: str | None = None,
                explanation: Sequence[str] | None = None, **fields: Any) -> "CaseResult":
        """A new result: this one with what a later step (the baseline's recording, an
        operator profile, the repro command) adds, each field declared by the row's type; a
        judged result itself never changes."""
        changes = {**fields, **({"verdict": verdict} if verdict else {}),
                   **({"message": message} if message else {})}
        return replace(self, row=amended_row(self.row, **changes),
                       explanation=self.explanation if explanation is None
                       else tuple(explanation))

    def row_dict(self) -> dict:
        """The case's row in results.json: its fields as its mode and the later steps wrote them,
        the verdict and its line last."""
        row = self.row.to_dict()
        for key in ("verdict", "message", "failure_tail"):
            if key in row:
                row[key] = row.pop(key)
        return row
