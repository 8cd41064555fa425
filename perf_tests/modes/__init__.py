"""The suite's modes, one module each (perf_tests/modes/base.py is the interface they share).

A session runs every mode whose `wanted(settings)` holds: the throughput gate, or instead of it
A/B of two stacks or the max batch search; time-to-train beside any of them. The order here is
the order of their sections in the reports. Adding a mode is its module plus one line here
(docs/adding-a-mode.md).
"""
from .ab import AB
from .max_batch import MaxBatch
from .throughput import Throughput
from .time_to_train import TimeToTrain

MODES = (Throughput, AB, MaxBatch, TimeToTrain)
