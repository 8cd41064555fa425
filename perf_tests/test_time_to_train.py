"""ResNet50 v1.5 time-to-train, one test per `_ttt` case (collected under --perf-time-to-train
or --perf-case ..._ttt): train to the target top-1, judged on time and accuracy against the
baseline (see perf_tests/modes/time_to_train/mode.py)."""
from perf_tests.report.junit import junit_properties


def test_time_to_train(ttt_case, perf_session, request):
    result = perf_session.measure(ttt_case)
    request.node.user_properties.extend(junit_properties(result.case_id, result.row))
    perf_session.enforce(result)
