"""The max batch mode (--perf-find-max-batch): the mode (mode), its search, a pure function of a
probe (search), and its verdict (verdict)."""
