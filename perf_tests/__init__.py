"""The ResNet50 v1.5 training-throughput regression suite: the pytest plugin (plugin.py), the test
functions of its cases (test_*.py), and its folders by concept, bottom to top: core, containers,
runs, environment, baselines, results, judging, report, cli, context, modes, session. A folder
imports only from those below it (tests/test_imports.py checks; docs/architecture.md draws them).
"""
