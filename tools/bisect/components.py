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
and importlib.metadata reports their versions. What cannot be layered is listed, not searched,
one line per reason.
"""
from __future__ import annotations

import dataclasses
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
    entries: tuple[str, ...] = ()  # its files and folders there (tools/bisect/stacks.py)
    paths: tuple[str, ...] = ()    # the folders its .pth files add to sys.path

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
                **({"location": self.location, "entries": list(self.entries),
                    "paths": list(self.paths)} if self.kind == DISTRIBUTION else {})}


@dataclass(frozen=True)
class NotLayered:
    """What differs but is not searched: `subject` (`six 1.17.0`, `six: absent -> 1.16.0`) and
    why; the lines group them by `reason`."""
    subject: str
    reason: str


# the subjects a `not layered` line names before `and N more`
SUBJECTS_SHOWN = 8


def not_layered_lines(left_out: list[NotLayered]) -> list[str]:
    """One line per reason, in the order met: `six 1.17.0: only in the reference (...)` for one
    subject, `only in the reference (...) (40): a 1, b 2, ... and 32 more` for several."""
    by_reason: dict[str, list[str]] = {}
    for item in left_out:
        by_reason.setdefault(item.reason, []).append(item.subject)
    lines = []
    for reason, subjects in by_reason.items():
        if len(subjects) == 1:
            lines.append(f"{subjects[0]}: {reason}")
            continue
        shown = subjects if len(subjects) <= SUBJECTS_SHOWN else subjects[:SUBJECTS_SHOWN - 1]
        more = f" and {len(subjects) - len(shown)} more" if len(shown) < len(subjects) else ""
        lines.append(f"{reason} ({len(subjects)}): {', '.join(shown)}{more}")
    return lines


def environment_components(reference: dict, candidate: dict) -> list[Component]:
    """Every variable the two sides' processes see with another value, or on one side only."""
    names = sorted(set(reference) | set(candidate))
    return [Component(ENV, name, reference.get(name), candidate.get(name)) for name in names
            if reference.get(name) != candidate.get(name)]


ONLY_IN_REFERENCE = "only in the reference (an overlay adds files; it cannot hide the reference's)"
NO_RECORD = "its installation lists no files (no RECORD) to layer"
NOT_VISIBLE = "its files are not visible from this host, e.g. inside a container"
PTH_RUNS_CODE = ("its .pth runs code at start-up (an import line), which a folder on PYTHONPATH "
                 "does not run")


def distribution_components(reference: dict, candidate: dict
                            ) -> tuple[list[Component], list[NotLayered]]:
    """The distributions whose version differs or that only the candidate has, as components;
    and what differs but cannot be layered, with why."""
    components, left_out = [], []
    for key in sorted(set(reference) | set(candidate)):
        ours, theirs = reference.get(key), candidate.get(key)
        if theirs is None:
            left_out.append(NotLayered(f"{ours['name']} {ours['version']}", ONLY_IN_REFERENCE))
            continue
        if ours is not None and ours["version"] == theirs["version"]:
            continue
        component = Component(DISTRIBUTION, theirs["name"], ours and ours["version"],
                              theirs["version"], theirs["location"], tuple(theirs["entries"]))
        missing = [entry for entry in component.entries
                   if not os.path.lexists(os.path.join(component.location, entry))]
        if not theirs["listed_files"] or not component.entries:
            left_out.append(NotLayered(component.change, NO_RECORD))
        elif missing:
            left_out.append(NotLayered(f"{component.change} ({component.location}/{missing[0]})",
                                       NOT_VISIBLE))
        else:
            paths = pth_paths(component)
            if paths is None:
                left_out.append(NotLayered(component.change, PTH_RUNS_CODE))
            else:
                components.append(dataclasses.replace(component, paths=paths))
    return components, left_out


def pth_paths(component: Component) -> tuple[str, ...] | None:
    """The folders the distribution's .pth files add to sys.path (the layered stack puts them on
    PYTHONPATH after the overlay, as site.py would); None where a .pth runs code, which only
    site.py does, in a site folder (an editable install's finder, setuptools' distutils shim)."""
    paths = []
    for entry in component.entries:
        if "/" in entry or not entry.endswith(".pth"):
            continue
        try:
            lines = Path(component.location, entry).read_text(errors="replace").splitlines()
        except OSError:
            return None
        for line in (line.rstrip() for line in lines):
            if line.startswith(("import ", "import\t")):
                return None
            if line and not line.startswith("#"):
                paths.append(os.path.normpath(os.path.join(component.location, line)))
    return tuple(paths)


def stack_components(reference_facts: dict, candidate_facts: dict, candidate: Stack,
                     reference: Stack = Stack()) -> tuple[list[Component], list[NotLayered]]:
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
        left_out.append(NotLayered(
            f"the images' own files ({reference.image.name if reference.image else 'none'} -> "
            f"{candidate.image.name if candidate.image else 'none'}: "
            + (f"{len(differing)} Python distributions differ, e.g. {', '.join(differing[:3])}"
               if differing else "no Python distribution differs") + "; "
            + (f"{len(packages)} Debian package{'s differ' if len(packages) > 1 else ' differs'}"
               f", e.g. {', '.join(packages[:3])}" if packages else "no Debian package differs")
            + ")", "one image's files cannot be layered over another's; list the images between "
            "them, one a line, in a --stacks file to find the first slower one"))
    elif candidate_facts["python"] != reference_facts["python"]:
        distributions, left_out = distribution_components(
            reference_facts["distributions"], candidate_facts["distributions"])
        components += distributions
        if candidate_facts["python_version"] != reference_facts["python_version"]:
            left_out.insert(0, NotLayered(
                f"python {reference_facts['python_version']} -> "
                f"{candidate_facts['python_version']}", "the interpreter itself (the "
                "candidate's distributions are layered over the reference's)"))
    if candidate.prefix:
        components.append(Component(PREFIX, "prefix", None, shlex.join(candidate.prefix)))
    return components, left_out


def build_overlay(components: list[Component], folder: Path) -> Path:
    """A folder of links to the candidate's files of these distributions, to put first on
    PYTHONPATH: each entry a link, made in a real folder of the overlay (a shared namespace
    folder such as nvidia/ made real, its members linked). Nothing is made through a link, so
    nothing is ever written into the candidate's folders."""
    folder.mkdir(parents=True, exist_ok=True)
    for component in components:
        for entry in component.entries:
            add_link(folder, entry.split("/"), Path(component.location, entry))
    for shared in folder.iterdir():
        if shared.is_dir() and not shared.is_symlink():
            merge_package(shared / "__init__.py")
    return folder


# A top-level folder the overlay made real (a namespace several distributions share, nvidia/)
# gets this __init__.py: the reference may have a regular package of the same name (DALI's
# nvidia-*-cu12 wheels bring nvidia/__init__.py), and a regular package anywhere on sys.path
# wins over namespace portions, so the overlay's members would not be seen; extend_path makes one
# package of every sys.path folder of the name, the overlay's first.
MERGED_PACKAGE = """# rn50-perf bisect overlay: one package of every folder of this name on sys.path
from pkgutil import extend_path
__path__ = extend_path(__path__, __name__)
"""


def merge_package(init: Path) -> None:
    """Write MERGED_PACKAGE at `init`, where there is none or where a distribution's empty one
    is linked (the CUDA 11 wheels' nvidia/__init__.py: a regular package that would hide the
    reference's own members of it); one with code of its own is left as it is."""
    if os.path.lexists(init):
        if not init.is_symlink() or init.stat().st_size:
            return
        init.unlink()
    init.write_text(MERGED_PACKAGE)


def add_link(overlay: Path, parts: list[str], target: Path) -> None:
    """Link `target` at overlay/parts. Where a folder is linked there already (the same folder
    name in another distribution's location), the link becomes a real folder of links to its
    members and `target`'s members go beside them; where a file is, the first one stays (the
    same file several distributions list)."""
    here = overlay
    for part in parts[:-1]:
        here = here / part
        if here.is_symlink() and here.is_dir():
            unfold(here)
        elif not os.path.lexists(here):
            here.mkdir()
        elif not here.is_dir():   # a file there (one distribution's file, another's folder)
            return
    link = here / parts[-1]
    if not os.path.lexists(link):
        link.symlink_to(target)
        return
    if os.path.realpath(link) == os.path.realpath(target) or not link.is_dir() \
            or not target.is_dir():
        return
    if link.is_symlink():
        unfold(link)
    for member in sorted(target.iterdir()):
        add_link(overlay, [*parts, member.name], member)


def unfold(link: Path) -> None:
    """A link to a folder becomes a real folder of links to that folder's members."""
    target = Path(os.readlink(link))
    link.unlink()
    link.mkdir()
    for member in sorted(target.iterdir()):
        (link / member.name).symlink_to(target / member.name)


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
        paths = [path for c in distributions for path in c.paths]
        settings["PYTHONPATH"] = os.pathsep.join(filter(None, [str(overlay), *paths,
                                                               str(SUITE_ROOT), tail]))
    wrapper = (["env", *[part for name in unset for part in ("-u", name)]] if unset else [])
    return Stack(python=sys.executable, prefix=tuple(wrapper + prefix),
                 env=tuple(sorted(settings.items())), image=reference.image)
