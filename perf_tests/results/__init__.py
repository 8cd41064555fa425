"""What measuring gives and where it goes: the result type and its row in results.json
(case_result), the file's schema and its one reader (document), the table of each kind's measures
(measures), the session's results folder (folder), and the sessions already run (history).
It may import core, environment and baselines."""
