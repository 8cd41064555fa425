"""What a mode is given to measure with: the `Context` and its services, each a module of its own:
the case's workers (workers), the rows the session keeps (rows), the session's baseline
store (baseline_store), the settings stored with a result, the repro command and the warnings.
It may import every folder below the modes (cli, results, baselines, judging, environment, runs,
containers, core), never a mode or the session."""
