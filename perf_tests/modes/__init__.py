"""The suite's modes, one module each, or a package where a mode has several (max_batch/,
time_to_train/; explain/, the follow-up a throughput regression gets): base.py is the interface they
share, outcomes.py what a verdict does to its test. A mode may import every folder below it
(context, cli, report, judging, results, baselines, environment, runs, containers, core), never
another mode's module nor the session.

A session runs every mode whose `wanted(settings)` holds: the throughput gate, or instead of it
A/B of two stacks, the max batch search or the interconnect probe alone; time-to-train beside
any but the last. The order here is the order of their sections in the reports. Adding a mode is
its module plus one line here (docs/adding-a-mode.md).
"""
from perf_tests.modes.ab import AB
from perf_tests.modes.collectives import Collectives
from perf_tests.modes.max_batch.mode import MaxBatch
from perf_tests.modes.throughput import Throughput
from perf_tests.modes.time_to_train.mode import TimeToTrain

MODES = (Throughput, AB, MaxBatch, Collectives, TimeToTrain)
