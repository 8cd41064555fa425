"""`rn50-perf report`: tables and plots from results files, extracted logs, baseline files and the
published figures (command), what it reads of each (sources), and the comparison of two (compare).
"""
