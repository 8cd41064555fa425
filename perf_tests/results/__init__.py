"""What measuring gives and where it goes: the result type and its row in results.json
(case_result), and the session's results folder (folder). It may import core and baselines."""
