"""Benchmarks with a command anyone can rerun, each a ratio measured side by side: the harness
against a bare loop (harness), an image session against a host session (image), the interconnect
probe's cost (probe), and the history site at scale (publish)."""
