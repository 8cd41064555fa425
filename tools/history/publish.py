"""The history as a static site: every session, image and driver, one folder a team opens in a
browser, from file:// or any static host, with no server and no network.

    rn50-perf publish perf_results/ --output site/
    rn50-perf publish perf_results/ ci/*/results.json baselines/nvidia-h200.json -o site/

Each input is a session's results.json, a session folder, a folder of session folders (such as
perf_results/), or a baseline file (baselines/<hardware>.json), in any order; sessions are shown
by their start time. The site (`--output`, default `site/`) holds index.html, its data
(data.js), the chart library (plotly.js from the plotly package) and each session's report.md
and run records. Per hardware and case, the page draws each session's runs and median coloured by
its verdict, the band it was judged against, the baseline and its lineage, and the step changes
tools.history.command finds, named with what changed there (an unconfirmed one dotted, a withdrawn
one listed with why, not drawn); a point shows its session's environment and links, two points
picked show the environment diff between them in the gate's wording; A/B sessions have a page of
their own; the view is in the URL. An input that cannot be used is left out with one line on stderr
and the rest is published; with nothing to publish, the status is 2. A replaced site is swapped
whole.
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

from perf_tests.core.text import counted, utc_now
from tools.cli import OneLineParser
from tools.command import verb_command
from tools.history.site.folder import FolderError, folder_size, write_site
from tools.history.site.pages import SiteBuilder
from tools.history.site.sources import Sources, read_sources
from tools.history.steps import CONFIRMED, UNCONFIRMED, WITHDRAWN
from tools.inputs import InputError, refused

PROG = verb_command("publish")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("inputs", nargs="+", type=Path, metavar="INPUT",
                        help="results.json files, session folders, folders of them, baseline "
                             "files")
    parser.add_argument("-o", "--output", type=Path, default=Path("site"),
                        help="the site's folder, new or one this tool wrote (default: site)")
    return parser


def publish(inputs: list[Path], output: Path) -> tuple[Sources, dict, Path]:
    """Reads the inputs and writes the site; returns what was read, the page's data and the
    index.html written."""
    sources = read_sources(inputs)
    if sources.empty:
        raise InputError(f"nothing to publish in {', '.join(map(str, inputs))}"
                         + "".join(f"; {note}" for note in sources.notes))
    data = SiteBuilder(sources).data(built_at=utc_now())
    return sources, data, write_site(output, data, sources.sessions)


def summary(data: dict, index: Path, seconds: float) -> str:
    """`published 7 sessions (3 series, 2 step changes, 1 unconfirmed, 1 A/B session, 2
    baseline files) in site/index.html: 0.4 s, 4.9 MB`: the step changes confirmed and holding,
    then those unconfirmed and withdrawn, where there are some."""
    states = Counter(step["state"] for series in data["series"] for step in series["steps"])
    parts = [counted(len(data["series"]), "series", "series"),
             counted(states[CONFIRMED], "step change", "step changes"),
             *(f"{states[state]} {state}" for state in (UNCONFIRMED, WITHDRAWN) if states[state]),
             counted(len(data["ab"]), "A/B session", "A/B sessions"),
             counted(len(data["baseline_files"]), "baseline file", "baseline files")]
    return (f"published {counted(len(data['sessions']), 'session', 'sessions')} "
            f"({', '.join(parts)}) in {index}: {seconds:.1f} s, "
            f"{folder_size(index.parent) / 1e6:.1f} MB")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    started = time.perf_counter()
    try:
        sources, data, index = publish(args.inputs, args.output)
    except (InputError, FolderError) as error:
        return refused(PROG, error)
    for note in sources.notes:
        print(f"{PROG}: {note}", file=sys.stderr)
    if data["steps_note"]:
        print(data["steps_note"])
    print(summary(data, index, time.perf_counter() - started))
    return 0
