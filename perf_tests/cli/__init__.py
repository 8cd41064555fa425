"""The command line: every option in one table (options), the parsers of their values (values),
the session's `Settings` and the rules between options (settings), what an empty -k selection
says (selection), and the command a failed case's line ends with (repro). It may import core,
containers, runs, baselines (the auto band's name), judging and report (the export formats), never
a mode or the session."""
