"""What measuring gives and where it goes: the result type and its row in results.json
(case_result), the session's results folder (folder), and the sessions already run (history).
It may import core, environment and baselines."""
