"""What a worker leaves for whoever launched it (the suite's protocol, the tools): rank 0's record
of the run, in `RECORD_FILE` and on stdout behind `RECORD_MARK`; a failing rank's failure, in
`failure_file(rank)` and on stdout behind `FAILURE_MARK`; the exit code. The lines on stdout reach
a launcher whose run folder is not shared between nodes.

No torch and no other module of the project: the suite imports this at its start.
"""
from __future__ import annotations

import json

RECORD_MARK = "RN50_RECORD "
FAILURE_MARK = "RN50_FAILURE "
RECORD_FILE = "record.json"
EXIT_ERROR = 1
EXIT_OOM = 3   # running out of memory is an outcome (a max-batch search's boundary), not a crash


def failure_file(rank: int) -> str:
    """The file in the run folder that holds `rank`'s failure."""
    return f"rank{rank}.failure.json"


def marked_line(mark: str, value: dict) -> str:
    """`value` as one line of stdout behind `mark`, as the launcher's reader looks for it."""
    return mark + json.dumps(value)


def exit_code(outcome: str) -> int:
    """A failed rank's exit status for its outcome (`oom` or `error`)."""
    return EXIT_OOM if outcome == "oom" else EXIT_ERROR
