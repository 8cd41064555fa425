"""One pytest session of the suite: `PerfSession` (the host probed once, the `Context` built, each
case handed to its mode), the steps around every mode's measuring (measure), the verdict as
pytest's outcome (outcomes) and the end-of-session report from each mode's section (report).
The top folder: it may import every other; only the plugin imports it."""
