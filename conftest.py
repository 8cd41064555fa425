"""Registers the suite's pytest plugin for sessions started in this checkout. Where the project
is installed (pip install . or -e .), its pytest11 entry point, named as this line names the
module, has registered it already: pytest finds it registered and loads it once."""
pytest_plugins = ["perf_tests.plugin"]
