"""ResNet50 v1.5 training throughput, one test per (nodes, devices, precision, batch) case.

The cases come from the profile (see perf_tests/cases.py); each measures R runs in fresh worker
processes and is judged against its baseline entry.
"""


def test_training_throughput(perf_case, perf_session):
    result = perf_session.measure(perf_case)
    perf_session.enforce(result)
