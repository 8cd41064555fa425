"""The suite's modes, one module each (perf_tests/modes/base.py is the interface they share).

A session runs every mode whose `wanted(settings)` holds: the throughput gate, or instead of it
A/B of two stacks, the max batch search or the interconnect probe alone; time-to-train beside
any but the last. The order here is
the order of their sections in the reports. Adding a mode is its module plus one line here
(docs/adding-a-mode.md).
"""
from .ab import AB
from .collectives import Collectives
from .max_batch import MaxBatch
from .throughput import Throughput
from .time_to_train import TimeToTrain

MODES = (Throughput, AB, MaxBatch, Collectives, TimeToTrain)
