"""The results folder of a session: raw run records as they finish, and `results.json`.

Layout: `<dir>/results.json`, `<dir>/<case_id>/run-<k>.json` (each run's record, written the
moment the run ends) and `<dir>/<case_id>/run-<k>/` (that run's logs). `results.json` is written
whole from what this process holds, case by case, and is always whole on disk; where the folder
is shared (pytest-xdist workers) each case is merged under a lock into what the others wrote, so
every worker's cases land. A session creates its folder when it starts, checking that it can
write there; an existing folder with anything in it is never reused.
"""
from __future__ import annotations

import contextlib
import itertools
import tempfile
import time
from pathlib import Path

from perf_tests.core.storage import locked, write_json_atomically
from perf_tests.core.text import utc_now
from perf_tests.results.document import (RESULTS_FILE, ResultsFileError, new_document,
                                         read_results)

DEFAULT_PARENT = "perf_results"   # where each session's default folder is made


class ResultsFolderError(Exception):
    """The results folder cannot be used; one line to act on."""


def create_default_folder(root: Path) -> Path:
    """A new `<root>/perf_results/<UTC time>` for this session, created here and now: a session
    that started in the same second finds the name taken and creates the next (`-2`, `-3`)."""
    parent = root / DEFAULT_PARENT
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    try:
        parent.mkdir(parents=True, exist_ok=True)
        for number in itertools.count(1):
            candidate = parent / (stamp if number == 1 else f"{stamp}-{number}")
            try:
                candidate.mkdir()  # atomic: exactly one session creates a given name
            except FileExistsError:
                continue
            check_writable(candidate)
            return candidate
    except OSError as error:
        raise ResultsFolderError(f"results folder {parent} cannot be created "
                                 f"({error.strerror}); pass a writable folder with "
                                 "--perf-results") from None


def create_new_folder(path: Path) -> None:
    """`--perf-results`: a folder that does not exist yet (or is empty), created and writable."""
    if path.exists() and not path.is_dir():
        raise ResultsFolderError(f"results folder {path} is a file; pass a new folder to "
                                 "--perf-results")
    if path.is_dir() and any(path.iterdir()):
        raise ResultsFolderError(f"results folder {path} already exists and is not empty; pass "
                                 "a new folder to --perf-results (results are never overwritten)")
    try:
        path.mkdir(parents=True, exist_ok=True)
        check_writable(path)
    except OSError as error:
        raise ResultsFolderError(f"results folder {path} cannot be written ({error.strerror}); "
                                 "pass a writable folder to --perf-results") from None


def check_writable(folder: Path) -> None:
    """Raises OSError unless a file can be created in `folder` (the probe is removed)."""
    with tempfile.TemporaryFile(dir=folder):
        pass


class ResultsFolder:
    def __init__(self, path: Path, shared: bool = False) -> None:
        self.path = Path(path)
        self.shared = shared   # other processes of the session write results.json too
        self.document: dict | None = None   # results.json as this process last wrote it

    def written(self, header: dict) -> dict:
        """results.json as it stands before this process adds to it: its own last writing, or
        where the folder is shared the file (the other processes' cases too); new, with
        `header`, before the first case."""
        document = self.load() if self.shared else self.document
        return document or new_document(header)

    def remove_if_empty(self) -> None:
        """At the end of a session that measured nothing (--collect-only, --help, Ctrl-C, or
        a pytest run of another project where the plugin is installed): the folder, and the
        default folders' `perf_results/` where nothing else is in it."""
        with contextlib.suppress(OSError):
            self.path.rmdir()  # fails, as it should, on a folder with anything in it
            if self.path.parent.name == DEFAULT_PARENT:
                self.path.parent.rmdir()

    @property
    def results_file(self) -> Path:
        return self.path / RESULTS_FILE

    def run_dir(self, case_id: str, index: int) -> Path:
        folder = self.path / case_id / f"run-{index}"
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def save_case(self, case_id: str, case: dict, header: dict) -> None:
        """Add one case to results.json (creating it with `header` the first time)."""
        self.path.mkdir(parents=True, exist_ok=True)
        with locked(self.results_file):
            document = self.written(header)
            document["cases"][case_id] = case
            document["updated_at"] = utc_now()
            write_json_atomically(self.results_file, document)
            self.document = document

    def record_interruption(self, planned: list[str], header: dict) -> dict | None:
        """Say in results.json that the session was stopped (Ctrl-C, SIGTERM), which case it
        stopped in (its finished runs are in its folder) and which planned cases
        never ran; None, and nothing written, where no case had begun."""
        started = [case_id for case_id in planned if (self.path / case_id).is_dir()]
        if not started and (self.document is None if not self.shared
                            else not self.results_file.exists()):
            return None
        with locked(self.results_file):
            document = self.written(header)
            ended = document["cases"]
            document["interrupted"] = {
                "at": utc_now(),
                "in_case": next((case_id for case_id in started if case_id not in ended), None),
                "not_run": [case_id for case_id in planned
                            if case_id not in ended and case_id not in started]}
            write_json_atomically(self.results_file, document)
            self.document = document
        return document["interrupted"]

    def load(self) -> dict | None:
        """results.json as written so far, by whichever process of the session: read where this
        process did not write it alone (a shared folder, the pytest-xdist controller's report);
        None before the first case ended. An unreadable one is a ResultsFolderError naming it."""
        if not self.results_file.exists():
            return None
        try:
            return read_results(self.results_file, "it was changed outside this session: "
                                "measure again into a new folder (--perf-results)")
        except ResultsFileError as error:
            raise ResultsFolderError(str(error)) from None

    def case(self, case_id: str) -> dict | None:
        """`case_id`'s row as another process of a shared folder wrote it."""
        document = self.load()
        return (document or {}).get("cases", {}).get(case_id)
