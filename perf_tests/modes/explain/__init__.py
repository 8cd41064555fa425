"""Why a regression is slower: the operator profile a profiled run takes (profiling) and its
comparison with the one stored with the baseline (comparison); the throughput mode follows a
regression up with it."""
