"""`rn50-perf extract-logs`: img/s and speedup over 1n1g from DLPerf-style training logs. How each
framework's log gives one speed is formats.py; the folder of logs, the summary per cluster shape
and the command are command.py."""
