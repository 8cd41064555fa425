"""The components a stack bisection searches: what differs between the reference stack (this
one) and a candidate, and the candidate's version of a group of them layered over the reference.

A component is one environment variable the two stacks set differently (read by running each
side's interpreter behind its prefix and settings), one installed distribution whose version
differs (each side's importlib.metadata, run by each interpreter), or the candidate's prefix as a
whole. Between two images the rest (their Python distributions, their Debian packages) is named,
not searched. A group is layered as a stack the A/B suite can run: the reference's interpreter, the
group's variables as `--perf-candidate-env` settings (a variable the candidate unsets through an
`env -u` prefix), the prefix where it is in the group, and the group's distributions through an
overlay: a folder of links to the candidate's own files of just those distributions (package
folders, modules, .dist-info), first on PYTHONPATH, so the reference's interpreter imports them
and importlib.metadata reports their versions. What cannot be layered is listed, not searched.
"""
from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from perf_tests.environment.differences import package_changes
from perf_tests.runs.launch import Stack
from tools.cli import SUITE_ROOT

ENV, DISTRIBUTION, PREFIX = "env", "distribution", "prefix"


@dataclass(frozen=True)
class Component:
    kind: str
    name: str                      # the variable, the distribution, or "prefix"
    reference: str | None          # its value or version on the reference; None: unset, absent
    candidate: str | None
    location: str = ""             # a distribution's folder on the candidate
    entries: tuple[str, ...] = ()  # a distribution's top-level files there

    @property
    def label(self) -> str:
        """How the bisection names it: `GOMP_SPINCOUNT=300`, `six==1.16.0`, `prefix 'taskset'`."""
        if self.kind == ENV:
            return f"{self.name}={self.candidate}" if self.candidate is not None \
                else f"{self.name} unset"
        if self.kind == DISTRIBUTION:
            return f"{self.name}=={self.candidate}"
        return f"prefix {self.candidate!r}"

    @property
    def change(self) -> str:
        """`GOMP_SPINCOUNT: unset -> 300`, `six: 1.17.0 -> 1.16.0`."""
        before = "unset" if self.kind == ENV else "absent"
        return (f"{self.name}: {self.reference if self.reference is not None else before} -> "
                f"{self.candidate if self.candidate is not None else before}")

    def to_dict(self) -> dict:
        return {"kind": self.kind, "name": self.name, "label": self.label,
                "reference": self.reference, "candidate": self.candidate,
                **({"location": self.location, "entries": list(self.entries)}
                   if self.kind == DISTRIBUTION else {})}


def environment_components(reference: dict, candidate: dict) -> list[Component]:
    """Every variable the two sides' processes see with another value, or on one side only."""
    names = sorted(set(reference) | set(candidate))
    return [Component(ENV, name, reference.get(name), candidate.get(name)) for name in names
            if reference.get(name) != candidate.get(name)]


def distribution_components(reference: dict, candidate: dict
                            ) -> tuple[list[Component], list[str]]:
    """The distributions whose version differs or that only the candidate has, as components;
    and one line each for what differs but cannot be layered."""
    components, left_out = [], []
    for key in sorted(set(reference) | set(candidate)):
        ours, theirs = reference.get(key), candidate.get(key)
        if theirs is None:
            left_out.append(f"{ours['name']} {ours['version']}: only in the reference (an overlay "
                            "adds files; it cannot hide the reference's)")
            continue
        if ours is not None and ours["version"] == theirs["version"]:
            continue
        component = Component(DISTRIBUTION, theirs["name"], ours and ours["version"],
                              theirs["version"], theirs["location"], tuple(theirs["entries"]))
        missing = [entry for entry in component.entries
                   if not os.path.lexists(os.path.join(component.location, entry))]
        if not theirs["listed_files"] or not component.entries:
            left_out.append(f"{component.change}: its installation lists no files (no RECORD) "
                            "to layer")
        elif missing:
            left_out.append(f"{component.change}: its files ({component.location}/{missing[0]}) "
                            "are not visible from this host, e.g. inside a container")
        else:
            components.append(component)
    return components, left_out


def stack_components(reference_facts: dict, candidate_facts: dict, candidate: Stack,
                     reference: Stack = Stack()) -> tuple[list[Component], list[str]]:
    """Every component that differs from `reference` (this stack) to `candidate` (variables,
    then distributions, then the prefix), and what differs but is not layered. Between two
    container images only the variables are layered (the reference's image run with the
    candidate's values): one image's files cannot be layered over another's."""
    components = environment_components(reference_facts["environ"], candidate_facts["environ"])
    left_out = []
    if candidate.image != reference.image:
        differing = [f"{c.name} {c.reference or 'absent'} -> {c.candidate}" for c in
                     distribution_components(reference_facts["distributions"],
                                             candidate_facts["distributions"])[0]]
        packages = [change.removeprefix("deb ") for change in package_changes(
            reference_facts.get("debian_packages") or {},
            candidate_facts.get("debian_packages") or {})]
        left_out.append(
            f"the images' own files ({reference.image.name if reference.image else 'none'} -> "
            f"{candidate.image.name if candidate.image else 'none'}: "
            + (f"{len(differing)} Python distributions differ, e.g. {', '.join(differing[:3])}"
               if differing else "no Python distribution differs") + "; "
            + (f"{len(packages)} Debian package{'s differ' if len(packages) > 1 else ' differs'}"
               f", e.g. {', '.join(packages[:3])}" if packages else "no Debian package differs")
            + "): one image's files cannot be layered over another's; list the images between "
            "them, one a line, in a --stacks file to find the first slower one")
    elif candidate_facts["python"] != reference_facts["python"]:
        distributions, left_out = distribution_components(
            reference_facts["distributions"], candidate_facts["distributions"])
        components += distributions
        if candidate_facts["python_version"] != reference_facts["python_version"]:
            left_out.insert(0, f"python {reference_facts['python_version']} -> "
                            f"{candidate_facts['python_version']}: the interpreter itself (the "
                            "candidate's distributions are layered over the reference's)")
    if candidate.prefix:
        components.append(Component(PREFIX, "prefix", None, shlex.join(candidate.prefix)))
    return components, left_out


def build_overlay(components: list[Component], folder: Path) -> Path:
    """A folder of links to the candidate's files of these distributions (namespace folders
    made real, their members linked), to put first on PYTHONPATH."""
    folder.mkdir(parents=True, exist_ok=True)
    for component in components:
        for entry in component.entries:
            link = folder / entry
            link.parent.mkdir(parents=True, exist_ok=True)
            if not link.is_symlink():
                link.symlink_to(Path(component.location) / entry)
    return folder


def layered_stack(group: list[Component], overlay_folder: Path,
                  reference: Stack = Stack()) -> Stack:
    """The reference's interpreter (in its image, where it has one) with the candidate's version
    of `group` layered over it."""
    settings = {c.name: c.candidate for c in group if c.kind == ENV and c.candidate is not None}
    unset = [c.name for c in group if c.kind == ENV and c.candidate is None]
    prefix = [word for c in group if c.kind == PREFIX for word in shlex.split(c.candidate)]
    distributions = [c for c in group if c.kind == DISTRIBUTION]
    if distributions:
        overlay = build_overlay(distributions, overlay_folder)
        # the workers' PYTHONPATH (the repository, then the user's), behind the overlay
        tail = settings.get("PYTHONPATH", os.environ.get("PYTHONPATH"))
        settings["PYTHONPATH"] = os.pathsep.join(filter(None, [str(overlay), str(SUITE_ROOT),
                                                               tail]))
    wrapper = (["env", *[part for name in unset for part in ("-u", name)]] if unset else [])
    return Stack(python=sys.executable, prefix=tuple(wrapper + prefix),
                 env=tuple(sorted(settings.items())), image=reference.image)
