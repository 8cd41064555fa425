"""What a run's stack is, and what differs between two: the environment lock each session writes
(lock) and the clauses a verdict's line names (differences). It may import core, containers and
runs."""
