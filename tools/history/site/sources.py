"""What a site is built from: the sessions (results.json files, session folders, folders of them)
and baseline files the user names, each read with the suite's own checks. An input that cannot
be used is left out with one line saying which and what to do; the rest is still published.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from perf_tests.baselines.file import BaselineError, BaselineFile, load_baseline_file
from perf_tests.results.document import RESULTS_FILE
from tools.history.series import Session, session_label
from tools.inputs import InputError, check_rows, checked_results, read_json

SHAPES = "a results.json, a session folder, a folder of them, or a baseline file"


@dataclass
class Published:
    """A session as the site names it: its folder's name, made unique where two share one."""
    name: str
    session: Session

    @property
    def folder(self) -> Path:
        return self.session.path.parent


@dataclass
class Sources:
    sessions: list[Published] = field(default_factory=list)
    baselines: list[BaselineFile] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)   # one line per input left out or renamed

    @property
    def empty(self) -> bool:
        return not self.sessions and not self.baselines


def read_sources(arguments: list[Path]) -> Sources:
    """Every session and baseline file among `arguments`, oldest session first."""
    sources, seen = Sources(), set()
    for argument in arguments:
        for path in candidate_files(argument, sources.notes):
            if path.resolve() not in seen:
                seen.add(path.resolve())
                read_one(path, sources)
    sources.sessions.sort(key=lambda published: published.session.document.get("started_at")
                          or published.session.label)
    return sources


def candidate_files(argument: Path, notes: list[str]) -> list[Path]:
    """The JSON files an argument names: itself, its results.json, or a folder's sessions and
    baseline files."""
    if not argument.exists():
        notes.append(f"left out: input {argument} does not exist; check the path")
        return []
    if argument.is_file():
        return [argument]
    if (argument / RESULTS_FILE).is_file():
        return [argument / RESULTS_FILE]
    found = sorted(argument.glob(f"*/{RESULTS_FILE}")) + sorted(argument.glob("*.json"))
    if not found:
        notes.append(f"left out: input {argument} holds no session (no {RESULTS_FILE} in it or "
                     f"its folders) and no baseline file; pass {SHAPES}")
    return found


def read_one(path: Path, sources: Sources) -> None:
    try:
        document = read_json(path, expected=SHAPES)
        if "entries" in document:
            sources.baselines.append(read_baseline(path))
        else:
            document = checked_session(path, document)
            add_session(Session(path, session_label(path, document), document), sources)
    except (InputError, BaselineError) as error:
        sources.notes.append(f"left out: {error}")


def read_baseline(path: Path) -> BaselineFile:
    baseline = load_baseline_file(path)
    if baseline.hardware is None:
        raise InputError(f"baseline file {path} names no hardware; add its \"hardware\" key "
                         "(the key of its file name, e.g. nvidia-h200)")
    return baseline


def checked_session(path: Path, document: dict) -> dict:
    """The session through the suite's reader (its version, an older file's kinds), with the
    whole-number shapes and the hardware a site groups by."""
    document = checked_results(path, document)
    check_rows(path, document["cases"])
    if not isinstance(document.get("hardware"), str):
        raise InputError(f"input {path} names no hardware; pass a results.json the suite wrote")
    return document


def add_session(session: Session, sources: Sources) -> None:
    """The session under its folder's name; a second session of that name gets `-2` (`-3`...),
    said in one line, so that both are published and the first keeps its permalinks."""
    taken = {published.name for published in sources.sessions}
    name = wanted = session.path.parent.name
    number = 1
    while name in taken:
        number += 1
        name = f"{wanted}-{number}"
    if name != wanted:
        first = next(published for published in sources.sessions if published.name == wanted)
        sources.notes.append(
            f"two sessions are named {wanted} ({first.session.path} and {session.path}): the "
            f"second is published as {name}; rename one of the folders to keep its name")
    sources.sessions.append(Published(name, session))
