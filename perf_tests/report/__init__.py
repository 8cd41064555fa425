"""What a session shows: the terminal and Markdown tables (tables, and a mode's own: ab,
collectives, max_batch, time_to_train, scaling), the plots (plots, plot_style) and the CI exports
(exports; junit for `--junitxml`). Rows in, text and files out: it may import judging, results,
baselines, environment, runs (a run's phases) and core, never the command line, a mode or the
session (the end-of-session report that asks each mode for its section is
perf_tests/session/report.py)."""
