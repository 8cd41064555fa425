"""The time-to-train mode (--perf-time-to-train): the mode (mode) and a case's figures and
verdict, pure functions of its runs (verdict)."""
