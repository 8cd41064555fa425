"""A case's figures as JUnit properties, where each JUnit reader looks for them.

pytest's `--junitxml` writes a test's `user_properties` as `<property>` elements of its
`<testcase>` (every junit_family, and through pytest-xdist). Readers that follow the JUnit schema
of Ant, as junitparser's default `JUnitXml` does, read properties of a `<testsuite>` only, so the
same pairs are also written there, each name prefixed with its case id
(`1n1g_fp32_b8:peak-memory_verdict`). pytest's `record_testsuite_property` cannot do that under
pytest-xdist (pytest issue 7767: a worker has no JUnit writer), so the controller adds them from
each test's report (`SuiteProperties`).

Each measure of the row's kind (results/measures.py) gives `<slug>` (its figure), `<slug>_unit`,
`<slug>_runs`, `<slug>_baseline`, `<slug>_delta`, `<slug>_tolerance` and `<slug>_verdict`, where
the row has them; a measure added to a kind's table shows here without a change to this module.
"""
from __future__ import annotations

from collections.abc import Mapping

from perf_tests.core.rows import Row
from perf_tests.core.row_values import row_of
from perf_tests.results.measures import field_of, measures_of

# The case's own keys (not a measure's figures), in this order; a key the row lacks is left out.
CASE_KEYS = ("verdict", "runs", "cv", "reached_target", "target_top1", "ratio_ci", "pairs",
             "baseline_update", "repro")
# The testsuite property names a case's pairs take: case id, this, the pair's name.
SUITE_SEPARATOR = ":"
SUITE_PLUGIN = "rn50-perf-junit-suite"


def property_text(value) -> str:
    if isinstance(value, (list, tuple)):   # runs, ratio_ci: numbers separated by spaces
        return " ".join("-" if item is None else property_text(item) for item in value)
    if isinstance(value, bool):
        return str(value).lower()
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def case_verdict_text(row: Row) -> str | None:
    """The `verdict` property: the row's verdict, and `, recorded` where the session wrote the
    case's runs into the baseline file (a refresh, `--perf-update-baselines`): such a test
    passes whatever its verdict against the entry it replaced, as the report's verdict column
    says it (`regression, recorded`), so a reader of the property is not told of a failure the
    test did not have."""
    if not row.verdict:
        return None
    return f"{row.verdict}, recorded" if row.baseline_update else row.verdict


def junit_properties(case_id: str, row: Row | Mapping) -> list[tuple[str, str]]:
    """(name, value) pairs for a case test's `user_properties`: `case_id`, the case's keys
    (CASE_KEYS: the row's fields, a kind's that it lacks left out), then each measure's
    figures and verdict."""
    row = row_of(case_id, row)
    own = {"verdict": case_verdict_text(row), "runs": len(row.runs_ips) or None}
    pairs: list[tuple[str, object]] = [("case_id", case_id)]
    pairs += [(key, value) for key in CASE_KEYS
              if (value := own[key] if key in own else field_of(row, key)) is not None]
    for measured in measures_of(case_id, row):
        slug = measured.measure.slug
        pairs += [(name, value) for name, value in (
            (slug, measured.value), (f"{slug}_unit", measured.measure.unit),
            (f"{slug}_runs", measured.runs or None), (f"{slug}_baseline", measured.baseline),
            (f"{slug}_delta", measured.delta), (f"{slug}_tolerance", measured.tolerance),
            (f"{slug}_verdict", measured.verdict)) if value is not None]
    return [(name, property_text(value)) for name, value in pairs]


def suite_properties(user_properties) -> list[tuple[str, str]]:
    """A case test's pairs as testsuite properties, named after its case; none for a test that
    is not a case's (it has no `case_id` pair first)."""
    pairs = list(user_properties)
    if not pairs or pairs[0][0] != "case_id":
        return []
    case_id = pairs[0][1]
    return [(f"{case_id}{SUITE_SEPARATOR}{name}", value) for name, value in pairs[1:]]


class SuiteProperties:
    """A pytest plugin for the process that writes `--junitxml` (the controller under
    pytest-xdist): each case's pairs, from its call report, as testsuite properties."""

    def __init__(self, junit_writer) -> None:
        self.junit_writer = junit_writer   # pytest's LogXML

    def pytest_runtest_logreport(self, report) -> None:
        if report.when != "call":
            return
        for name, value in suite_properties(report.user_properties):
            self.junit_writer.add_global_property(name, value)


def add_suite_properties(config) -> None:
    """Where this process writes `--junitxml`, copy each case's pairs to the testsuite."""
    # pytest's own record_testsuite_property finds its JUnit writer under this key.
    from _pytest.junitxml import xml_key

    junit_writer = config.stash.get(xml_key, None)
    if junit_writer is not None and not config.pluginmanager.has_plugin(SUITE_PLUGIN):
        config.pluginmanager.register(SuiteProperties(junit_writer), SUITE_PLUGIN)
