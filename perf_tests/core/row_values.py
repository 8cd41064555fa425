"""A row's values as its kind's type, and back: a row of results.json typed (`row_of`,
`rows_of`; a key the type does not declare kept in `unknown`, a declared one held as null in
`nulls`), the row a mode writes (`new_row`, `amended_row`: a field its kind does not declare
fails there, named), and what only some kinds hold, for a reader of rows of several kinds
(`median_ips(row)`: None for a max batch row). The types are perf_tests/core/rows.py.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from perf_tests.core.cases import row_kind
from perf_tests.core.rows import (NOT_KEYS, ROW_TYPES, ABRow, CollectivesRow, MaxBatchRow, Row,
                                  Side, Speed, ThroughputRow, TimeToTrainRow)


def typed_values(row_type: type, data: Mapping[str, Any]) -> tuple[dict, dict]:
    """(the values of `data` that `row_type` declares, as its fields hold them: lists as
    tuples, mappings read-only, a side as a `Side`, the declared keys held as null in `nulls`
    where the type has it; the keys it does not declare)."""
    names = {one.name for one in dataclasses.fields(row_type)}
    fields = names - NOT_KEYS
    known: dict = {}
    unknown, nulls = {}, set()
    for key, value in data.items():
        if key not in fields:
            unknown[key] = value
        elif value is None:
            nulls.add(key)
        elif key in ("reference", "candidate") and row_type is ABRow:
            known[key] = side_of(value)
        elif isinstance(value, list):
            known[key] = tuple(value)
        elif isinstance(value, dict):
            known[key] = MappingProxyType(value)
        else:
            known[key] = value
    if nulls and "nulls" in names:
        known["nulls"] = frozenset(nulls)
    return known, unknown


def side_of(data: Mapping[str, Any] | None) -> Side:
    """One side of an A/B row, typed as a row is."""
    known, unknown = typed_values(Side, data or {})
    return Side(unknown=MappingProxyType(unknown), **known)


def row_of(case_id: str, data: Mapping[str, Any] | Row) -> Row:
    """`data`, a row of results.json, as its kind's type (a typed row is returned as it is)."""
    if isinstance(data, Row):
        return data
    kind = row_kind(case_id, dict(data))
    known, unknown = typed_values(ROW_TYPES[kind], data)
    known["kind"] = kind
    return ROW_TYPES[kind](case_id=case_id, unknown=MappingProxyType(unknown), **known)


def declared_values(kind: str, case_id: str, fields: Mapping[str, Any]) -> dict:
    """`fields` as `kind`'s row type holds them (`typed_values`), an A/B side as a `Side` that
    writes its keys as given; a TypeError names each key the type (or `Side`) does not
    declare."""
    row_type = ROW_TYPES[kind]
    known, unknown = typed_values(row_type, fields)
    undeclared = sorted(unknown)
    for name in ("reference", "candidate"):
        if isinstance(known.get(name), Side):
            undeclared += [f"{name}.{key}" for key in known[name].unknown]
            known[name] = dataclasses.replace(known[name], written=tuple(fields[name]))
    if undeclared:
        raise TypeError(f"{case_id}: the {kind} row declares "
                        f"no {', '.join(undeclared)}: declare it in {row_type.__name__} "
                        "(perf_tests/core/rows.py) or leave it out")
    return known


def new_row(kind: str, case_id: str, **fields: Any) -> Row:
    """The row a mode writes for `case_id`: `fields`, each declared by `kind`'s type, or a
    TypeError that names the ones it does not declare; results.json gets them as written."""
    known = declared_values(kind, case_id, {"kind": kind, **fields})
    return ROW_TYPES[kind](case_id=case_id, written=("kind", *[key for key in fields
                                                                if key != "kind"]), **known)


def amended_row(row: Row, **fields: Any) -> Row:
    """`row` with `fields` added or changed, each declared by its type (a TypeError names the
    others), written after the row's own keys; a field amended to None is held as null."""
    known = declared_values(row.kind, row.case_id, fields)
    defaults = {one.name: one for one in dataclasses.fields(row)}
    for key in known.pop("nulls", ()):
        one = defaults[key]
        known[key] = one.default_factory() if one.default is dataclasses.MISSING \
            else one.default
    nulls = (row.nulls - set(fields)) | {key for key, value in fields.items() if value is None}
    return dataclasses.replace(row, **known, nulls=frozenset(nulls), written=row.written + tuple(
        key for key in fields if key not in row.written))


def rows_of(cases: Mapping[str, Any]) -> dict[str, Row]:
    """Every row of a results document's `cases`, typed, in their order."""
    return {case_id: row_of(case_id, data) for case_id, data in cases.items()}


# What only some kinds of row hold, for a reader of rows of several kinds (rn50-perf report's
# sources may mix kinds in one table or figure): a row of another kind states none of it.

def speed_of(row: Row) -> Speed:
    """The row's img/s summary, speedup and peak memory, where its kind has them (throughput,
    A/B)."""
    return row if isinstance(row, Speed) else Speed(row.case_id)


def judged_of(row: Row) -> ThroughputRow:
    """What the throughput gate states of a case beyond its speed (its baseline, what decided
    its verdict, energy, shared devices), where the row is a throughput row."""
    return row if isinstance(row, ThroughputRow) else ThroughputRow(row.case_id)


def median_ips(row: Row) -> float | None:
    """The row's median img/s (A/B's: the candidate's), where its kind measures one."""
    return row.median_ips if isinstance(row, (Speed, TimeToTrainRow)) else None


def delta_of(row: Row) -> float | None:
    """The change against the baseline (A/B: the candidate's against the reference)."""
    return row.delta if isinstance(row, (ThroughputRow, ABRow)) else None


def busbw_of(row: Row) -> float | None:
    """The interconnect probe's bus bandwidth, of a throughput case or the probe alone."""
    return row.busbw_gbps if isinstance(row, (ThroughputRow, CollectivesRow)) else None


def marked_runs_of(row: Row) -> Mapping[str, Any]:
    """The runs the host marked (run number -> why), of a throughput or an A/B case."""
    return row.marked_runs if isinstance(row, (ThroughputRow, ABRow)) else {}


def peak_memory_of(row: Row) -> int | None:
    """The peak memory, bytes: a throughput or A/B case's median, a max batch search's at its
    largest batch."""
    return row.peak_memory_bytes if isinstance(row, (Speed, MaxBatchRow)) else None
