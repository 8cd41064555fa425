"""What the history site costs at scale: generated sessions (tools/history/site/generated.py,
the full profile's 12 cases by default), the time `rn50-perf publish` takes to build
their site, as a user runs it (a fresh interpreter each time), the folder's size, and the time
the page takes to open in headless Chromium (from the start of navigation until its view is
drawn: the index, and one case's series of every session, in a new browser each try).

    rn50-perf bench-publish                        # 1,000 sessions of 12 cases
    rn50-perf bench-publish --sessions 200 --repeat 5 --keep /tmp/site-bench

The builds and the openings alternate with nothing else between them; each line gives every
try and their median. Without Chromium or selenium the opening is left out in one line.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tools.cli import OneLineParser
from tools.command import verb_command
from tools.history.site.browser import browser_problem, open_page, page_errors, start_browser
from tools.history.site.folder import CHART_LIBRARY, DATA_SCRIPT, folder_size
from tools.history.site.generated import HARDWARE, case_ids, write_sessions

PROG = verb_command("bench-publish")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=1000, help="sessions (default 1000)")
    parser.add_argument("--cases", type=int, default=12, choices=range(1, 13), metavar="1-12",
                        help="cases a session (default 12)")
    parser.add_argument("--repeat", type=int, default=3, help="tries of each (default 3)")
    parser.add_argument("--keep", type=Path, default=None,
                        help="a new folder to keep the sessions and the site in (default: a "
                             "temporary one, removed)")
    return parser


def timed_build(sessions: Path, site: Path) -> float:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "tools", "publish", str(sessions), "--output",
                           str(site)], capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{PROG}: error: tools.history.publish failed: {done.stderr.strip()}")
    return seconds


def tries(label: str, values: list[float], unit: str) -> str:
    shown = ", ".join(f"{value:.2f}" for value in values)
    return f"{label}: median {statistics.median(values):.2f} {unit} (tries: {shown})"


def measure(folder: Path, args: argparse.Namespace) -> list[str]:
    sessions, site = folder / "perf_results", folder / "site"
    write_sessions(sessions, args.sessions, cases=args.cases)
    lines = [f"{args.sessions} generated sessions of {args.cases} cases in {sessions}"]
    builds = [timed_build(sessions, site) for _ in range(args.repeat)]
    lines.append(tries("build (rn50-perf publish)", builds, "s"))
    lines.append(f"folder: {folder_size(site) / 1e6:.2f} MB in {site} (data "
                 f"{(site / DATA_SCRIPT).stat().st_size / 1e6:.2f} MB, chart library "
                 f"{(site / CHART_LIBRARY).stat().st_size / 1e6:.2f} MB)")
    problem = browser_problem()
    if problem:
        return lines + [f"page opening not measured: {problem}"]
    openings, errors = open_views(site / "index.html", args)
    lines += [tries(f"page open, {label}", values, "ms") for label, values in openings.items()]
    return lines + [f"page errors: {errors}" if errors else "page errors: none"]


LIBRARY_ALONE = ("<!doctype html><body><script src=\"site/plotly.min.js\"></script>"
                 "<script>document.body.dataset.drawn = 1; window.RN50 = {textAt: 0, "
                 "drawnAt: performance.now()};</script>")


def open_views(index: Path, args: argparse.Namespace) -> tuple[dict[str, list[float]], list]:
    """Each try in a new browser (nothing cached from the last): the index, then one case's
    series (the first view that loads the chart library), each until its text is drawn and
    until its charts are; then, in another new browser, a page that only loads the chart
    library: what the chart waits for, beside it in the same tries."""
    views = {"index": "", "one case's series": f"#view=case&series={HARDWARE}/"
             f"{case_ids(args.cases)[0]}"}
    library = index.parent.parent / "library-alone.html"
    library.write_text(LIBRARY_ALONE)
    openings: dict[str, list[float]] = {}
    errors = []
    for _ in range(args.repeat):
        for pages in (views, {"plotly.min.js alone, evaluated": library}):
            driver = start_browser()
            try:
                for label, view in pages.items():
                    if isinstance(view, Path):
                        openings.setdefault(label, []).append(open_page(driver, view)[1])
                        continue
                    text, charts = open_page(driver, index, view)
                    openings.setdefault(f"{label}, text drawn", []).append(text)
                    if view:
                        openings.setdefault(f"{label}, chart drawn", []).append(charts)
                errors += page_errors(driver)
            finally:
                driver.quit()
    return openings, errors


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.keep is not None:
        if args.keep.exists():
            return build_parser().error(f"--keep {args.keep} exists; pass a new folder")
        args.keep.mkdir(parents=True)
        lines = measure(args.keep, args)
    else:
        with tempfile.TemporaryDirectory(prefix="bench-publish-") as folder:
            lines = measure(Path(folder), args)
    for line in lines:
        print(line)
    return 0
