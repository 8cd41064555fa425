"""Registers the suite's pytest plugin for every session started in this repository."""
pytest_plugins = ["perf_tests.plugin"]
