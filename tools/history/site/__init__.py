"""The history site: one static folder (index.html, its data and the chart library) built from
sessions' results and baseline files, opened from file:// or any static host with no network.

`sources` reads what the user passes (results.json files, session folders, folders of them, baseline
files) and says in one line what it leaves out; `pages` turns them into the data the page shows
(series, points, step changes, A/B sessions, baselines and their lineage); `folder` writes the
folder; `page/` is the page itself; `generated` makes sessions of a given shape for the benchmark
and the tests; `browser` drives Debian's headless Chromium. It imports the suite's readers
(perf_tests) and tools.history.command's step search; no command line: tools/history/publish.py is
that."""
