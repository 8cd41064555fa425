"""The results folder of a session: raw run records as they finish, and `results.json`.

Layout: `<dir>/results.json`, `<dir>/<case_id>/run-<k>.json` (each run's record, written the
moment the run ends) and `<dir>/<case_id>/run-<k>/` (that run's logs). `results.json` is merged
case by case under a lock, so pytest-xdist workers sharing the folder all land, and it is always
whole on disk. An existing folder with anything in it is never reused.
"""
from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from pathlib import Path

from .storage import locked, write_json_atomically

SCHEMA_VERSION = 1
RESULTS_FILE = "results.json"


class ResultsFolderError(Exception):
    """The results folder cannot be used; one line to act on."""


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_default_folder(root: Path) -> Path:
    """`<root>/perf_results/<UTC timestamp>`, with a suffix if that name is taken."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    candidate = root / "perf_results" / stamp
    suffix = 1
    while candidate.exists():
        suffix += 1
        candidate = root / "perf_results" / f"{stamp}-{suffix}"
    return candidate


def check_new_folder(path: Path) -> None:
    if path.exists() and not path.is_dir():
        raise ResultsFolderError(f"results folder {path} is a file; pass a new folder to "
                                 "--perf-results")
    if path.is_dir() and any(path.iterdir()):
        raise ResultsFolderError(f"results folder {path} already exists and is not empty; pass "
                                 "a new folder to --perf-results (results are never overwritten)")


class ResultsFolder:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    @property
    def results_file(self) -> Path:
        return self.path / RESULTS_FILE

    def run_dir(self, case_id: str, index: int) -> Path:
        folder = self.path / case_id / f"run-{index}"
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def save_run(self, case_id: str, index: int, run: dict) -> Path:
        path = self.path / case_id / f"run-{index}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomically(path, run)
        return path

    def save_case(self, case_id: str, case: dict, header: dict) -> None:
        """Merge one case into results.json (creating it with `header` the first time)."""
        self.path.mkdir(parents=True, exist_ok=True)
        with locked(self.results_file):
            document = self.load() or {"schema_version": SCHEMA_VERSION, **header, "cases": {}}
            document["cases"][case_id] = case
            document["updated_at"] = utc_now()
            write_json_atomically(self.results_file, document)

    def load(self) -> dict | None:
        if not self.results_file.exists():
            return None
        return json.loads(self.results_file.read_text())

    def case(self, case_id: str) -> dict | None:
        document = self.load()
        return (document or {}).get("cases", {}).get(case_id)
