"""The suite's tools, the verbs of one command, `rn50-perf` (command.py; `python3 -m tools VERB` in
a checkout): a package a tool of several modules (bisect, calibrate, gpu, history, report, bench), a
module one of one; cli.py, inputs.py and worker_runs.py are what they share. A tool may import
anything of perf_tests and rn50_model; nothing there imports a tool."""
