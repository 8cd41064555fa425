"""ResNet50 v1.5 training throughput, one test per (nodes, devices, precision, batch) case.

The cases come from the profile (see perf_tests/core/cases.py); each measures R runs in fresh worker
processes and is judged against its baseline entry. The case's figures become the test's
properties, so `--junitxml` carries them.
"""
from perf_tests.report.junit import junit_properties


def test_training_throughput(perf_case, perf_session, request):
    result = perf_session.measure(perf_case)
    request.node.user_properties.extend(junit_properties(result.case_id, result.row))
    perf_session.enforce(result)
