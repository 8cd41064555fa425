"""A case's throughput across sessions: the sessions read into series (series), the step changes and
what changed there (steps), `rn50-perf history` (command, history.md and history.png) and
`rn50-perf publish` (publish: the history as a static site, built by site/)."""
