"""The vocabulary every folder speaks: case ids and profiles (cases), how figures read in text
(text), the statistics under the verdicts (stats), and files written so that nothing is lost
(storage). It imports no other folder of perf_tests; of the workload below them all (rn50_model),
its precisions and targets and its atomic writes."""
