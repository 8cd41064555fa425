"""Writes the site's folder: the page (page/), the chart library (plotly.js, as the plotly package
ships it), the data as a script (a page opened from file:// may load scripts but not fetch
JSON), and each session's report.md and run records under sessions/<name>/, so that the links
work from any static host. A folder is replaced whole: built beside the old one,
then swapped in.
"""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from tools.history.site.sources import Published

PAGE = Path(__file__).resolve().parent / "page"
DATA_SCRIPT = "data.js"
DATA_VARIABLE = "RN50_HISTORY"
CHART_LIBRARY = "plotly.min.js"
MARKER = ".rn50-perf-site"   # says a folder is a site this tool wrote (and may replace)


class FolderError(Exception):
    """The site cannot be written where asked; one line naming the folder and what to do."""


def chart_library() -> Path:
    """plotly.min.js as the installed plotly package ships it."""
    try:
        import plotly
    except ImportError:
        raise FolderError("the site's chart library comes from the plotly package, which does "
                          "not import here; pip install plotly") from None
    path = Path(plotly.__file__).parent / "package_data" / CHART_LIBRARY
    if not path.is_file():
        raise FolderError(f"the plotly package has no {path}; reinstall it (pip install "
                          "--force-reinstall plotly)")
    return path


def check_output(output: Path) -> None:
    """A new folder, an empty one, or a site this tool wrote before."""
    if output.exists() and not output.is_dir():
        raise FolderError(f"output {output} is a file; pass a folder with --output")
    if output.is_dir() and any(output.iterdir()) and not (output / MARKER).exists():
        raise FolderError(f"output {output} holds files this tool did not write; pass a new "
                          "folder with --output (a site it wrote is replaced whole)")


def write_site(output: Path, data: dict, sessions: list[Published]) -> Path:
    """The site in `output` (replacing the one there); returns its index.html."""
    check_output(output)
    library = chart_library()
    output.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".{output.name}-", dir=output.parent))
    try:
        for page_file in PAGE.iterdir():
            shutil.copyfile(page_file, building / page_file.name)
        shutil.copyfile(library, building / CHART_LIBRARY)
        (building / DATA_SCRIPT).write_text(data_script(data))
        copy_session_files(building / "sessions", data, sessions)
        (building / MARKER).write_text("written by rn50-perf publish\n")
        swap_in(building, output)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    return output / "index.html"


def data_script(data: dict) -> str:
    """`window.RN50_HISTORY = JSON.parse('...');`: JSON.parse of one string evaluates faster
    than the same data as a script's literal (about half the time, 5 MB in Chromium); in single
    quotes, JSON's own double quotes need no escaping."""
    text = json.dumps(data, separators=(",", ":"))
    quoted = text.replace("\\", "\\\\").replace("'", "\\'")
    return f"window.{DATA_VARIABLE} = JSON.parse('{quoted}');\n"


def copy_session_files(target: Path, data: dict, sessions: list[Published]) -> None:
    """Each session's report.md, and the run records its points link."""
    for published, entry in zip(sessions, data["sessions"]):
        folder = target / published.name
        for name in entry["files"]:
            folder.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(published.folder / name, folder / name)
    for series in data["series"]:
        for point in series["points"]:
            published = sessions[point["session"]]
            for name in point.get("run_files", []):
                case_folder = target / published.name / series["case_id"]
                case_folder.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(published.folder / series["case_id"] / name, case_folder / name)


def swap_in(building: Path, output: Path) -> None:
    """`building` becomes `output`; the site that was there is removed once it has."""
    old = None
    if output.exists():
        old = output.with_name(f".{output.name}-old")
        shutil.rmtree(old, ignore_errors=True)
        output.rename(old)
    building.rename(output)
    output.chmod(0o755)   # mkdtemp made it private; a static host serves it
    if old is not None:
        shutil.rmtree(old)


def folder_size(folder: Path) -> int:
    """Bytes of the files under `folder`."""
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())
