"""The bisection's stack reading and overlays on stacks of real wheels as pip installs them
(tests/real_wheels.py): nvidia-* namespace libraries sharing nvidia/ and nvidia/cu13/, PEP
639's .dist-info/licenses/, compiled extensions with an auditwheel .libs folder, a .pth that runs
code, a console script (issue 63: a CUDA torch upgrade crashed `rn50-perf bisect` linking
cuda_bindings' .dist-info/licenses through its .dist-info, into the candidate's own venv)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT, repository_importable
from perf_tests.runs.host import worker_environment
from perf_tests.runs.launch import Stack
from real_wheels import (CANDIDATE_WHEELS, REFERENCE_WHEELS, WheelsUnavailable, downloaded_wheels,
                         wheel_venv)
from test_bisect_stack import SyntheticRuns
from tools.bisect.components import (DISTRIBUTION, ONLY_IN_REFERENCE, PTH_RUNS_CODE, Component,
                                     build_overlay, layered_stack, not_layered_lines,
                                     stack_components)
from tools.bisect.stacks import read_stack

LAYERED = ["hidapi==0.15.0", "iniconfig==2.1.0", "nvidia-cuda-profiler-api==13.5.25",
           "nvidia-nvtx==13.5.25", "nvidia-nvtx-cu11==11.8.86", "nvidia-nvtx-cu12==12.9.79"]

# Run through a layered stack: what of the candidate's wheels it imports and finds.
SEEN = r"""
import ctypes, importlib.metadata as m, importlib.util, json, os
def version(name):
    try:
        return m.version(name)
    except m.PackageNotFoundError:
        return None
nvidia = importlib.util.find_spec("nvidia")
roots = list(nvidia.submodule_search_locations) if nvidia else []
def found(path):
    return [os.path.join(root, path) for root in roots if os.path.exists(os.path.join(root, path))]
seen = {name: version(name) for name in ("hidapi", "iniconfig", "nvidia-cuda-profiler-api",
                                         "nvidia-nvtx", "nvidia-nvtx-cu11", "nvidia-nvtx-cu12")}
seen["nvtx3interop"] = [bool(ctypes.CDLL(path)) for path in found("nvtx/lib/libnvtx3interop.so.1")]
seen["cu13"] = sorted(name for root in roots for name in
                      (os.listdir(os.path.join(root, "cu13", "include"))
                       if os.path.isdir(os.path.join(root, "cu13", "include")) else []))
if seen["hidapi"]:
    import hid
    seen["hid"] = hid.version_str()
print(json.dumps(seen))
"""


@pytest.fixture(scope="module")
def wheel_stacks(tmp_path_factory):
    """The reference and the candidate venvs' interpreters."""
    try:
        cache = downloaded_wheels()
        folder = tmp_path_factory.mktemp("wheel-venvs")
        return (wheel_venv(folder / "reference", REFERENCE_WHEELS, cache),
                wheel_venv(folder / "candidate", CANDIDATE_WHEELS, cache))
    except WheelsUnavailable as error:
        pytest.skip(str(error))


def tree(folder: Path) -> dict[str, str]:
    """Every path under `folder` and what it is (a link's target), to show nothing changed."""
    found = {}
    for root, folders, files in os.walk(folder):
        for name in folders + files:
            path = os.path.join(root, name)
            found[path] = os.readlink(path) if os.path.islink(path) else \
                ("folder" if os.path.isdir(path) else str(os.path.getsize(path)))
    return found


def seen_through(stack: Stack) -> dict:
    done = subprocess.run(stack.wrap([sys.executable, "-c", SEEN]),
                          env=worker_environment(REPO_ROOT), cwd=REPO_ROOT, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_real_wheels_are_read_as_entries_none_inside_another(wheel_stacks):
    """A .dist-info with licenses/ (and hidapi's sboms/) is one entry; nvidia/ and nvidia/cu13/,
    shared, are never an entry, their members are; no entry of any distribution lies inside
    another's, so no link can be made through another."""
    candidate = read_stack(Stack(python=str(wheel_stacks[1])), "the candidate")
    distributions = candidate["distributions"]
    entries = {key: distributions[key]["entries"] for key in
               ("nvidia-nvtx-cu12", "nvidia-nvtx", "nvidia-cuda-profiler-api", "hidapi")}
    assert "nvidia_nvtx_cu12-12.9.79.dist-info" in entries["nvidia-nvtx-cu12"]
    assert "nvidia/nvtx/lib/libnvtx3interop.so.1" in entries["nvidia-nvtx-cu12"]
    assert {"nvidia/cu13/lib", "nvidia_nvtx-13.5.25.dist-info"} <= set(entries["nvidia-nvtx"])
    assert "nvidia/cu13/include/cudaProfiler.h" in entries["nvidia-cuda-profiler-api"]
    assert [entry.split(".")[0] if entry.endswith(".so") else entry
            for entry in sorted(entries["hidapi"])] == [
        "hid", "hidapi-0.15.0.dist-info", "hidapi.libs", "hidraw"]   # hid.cpython-311-...so
    every = [(key, f"{d['location']}/{entry}") for key, d in distributions.items()
             for entry in d["entries"]]
    for key, path in every:
        inside = [(other, path_) for other, path_ in every if path_.startswith(path + "/")]
        assert not inside, (key, path, inside[:3])
    assert not any(entry.startswith(("..", "/")) or entry in ("nvidia", "nvidia/cu13")
                   for _, d in distributions.items() for entry in d["entries"])


def test_overlays_of_real_wheels_import_them_and_write_nothing_into_the_candidate(
        wheel_stacks, tmp_path):
    """Every layered distribution imports through the overlay, all together and each alone (the
    nvidia libraries found through the shared namespace, nvtx's library loaded, hidapi's
    extension finding its .libs), each alone bringing no other's files; the candidate's folder
    is the same before and after."""
    reference_python, candidate_python = map(str, wheel_stacks)
    candidate = Stack(python=candidate_python)
    components, left_out = stack_components(read_stack(Stack(python=reference_python), "ref"),
                                            read_stack(candidate, "the candidate"), candidate)
    assert [c.label for c in components] == LAYERED
    assert not_layered_lines(left_out) == [
        f"pytest-cov: absent -> 5.0.0: {PTH_RUNS_CODE}",
        f"{ONLY_IN_REFERENCE} (2): tabulate 0.9.0, termcolor 2.4.0"]
    site = Path(components[0].location)
    before = tree(site.parent.parent.parent)
    together = seen_through(layered_stack(components, tmp_path / "all"))
    assert together.pop("hid")   # hidapi's extension loaded, its libraries from hidapi.libs
    assert together == {"hidapi": "0.15.0", "iniconfig": "2.1.0",
                        "nvidia-cuda-profiler-api": "13.5.25", "nvidia-nvtx": "13.5.25",
                        "nvidia-nvtx-cu11": "11.8.86", "nvidia-nvtx-cu12": "12.9.79",
                        "nvtx3interop": [True],
                        "cu13": ["cudaProfiler.h", "cuda_profiler_api.h", "nvtx3", "nvtxw3"]}
    alone = {c.name: seen_through(layered_stack([c], tmp_path / c.name)) for c in components}
    assert alone["nvidia-nvtx-cu12"]["nvtx3interop"] == [True]
    assert alone["nvidia-nvtx-cu12"]["cu13"] == []
    assert alone["nvidia-nvtx"]["cu13"] == ["nvtx3", "nvtxw3"]
    assert alone["nvidia-cuda-profiler-api"]["cu13"] == ["cudaProfiler.h", "cuda_profiler_api.h"]
    assert alone["iniconfig"]["iniconfig"] == "2.1.0"
    for component in components:   # each alone: its version seen, no other candidate's
        others = {name: version for name, version in alone[component.name].items()
                  if name in {c.name for c in components} - {"iniconfig", component.name}}
        assert alone[component.name][component.name] == component.candidate
        assert not any(others.values()), (component.name, others)
    assert tree(site.parent.parent.parent) == before


def test_an_overlay_never_makes_a_link_through_a_link(wheel_stacks, tmp_path):
    """Entries one inside another (as the stack reading made them before: nvidia/ whole, a
    .dist-info and its licenses/) and a folder of the same name in another location: where a
    folder is linked already it becomes a real folder of links, so nothing is made inside the
    candidate's folders (before, the second link went through the first: into the candidate's
    nvidia/, and a FileExistsError on licenses/)."""
    candidate_venv = wheel_stacks[1].parent.parent
    site = next(candidate_venv.glob("lib/python*/site-packages"))
    other = tmp_path / "other-location"
    (other / "nvidia" / "extra").mkdir(parents=True)
    (other / "nvidia" / "extra" / "lib.txt").write_text("")
    info = "nvidia_nvtx_cu12-12.9.79.dist-info"
    components = [Component(DISTRIBUTION, "a", None, "1", str(site), ("nvidia",)),
                  Component(DISTRIBUTION, "b", None, "1", str(other), ("nvidia/extra",)),
                  Component(DISTRIBUTION, "c", None, "1", str(site), (info, f"{info}/licenses"))]
    before = tree(candidate_venv), tree(other)
    overlay = build_overlay(components, tmp_path / "overlay")
    assert (tree(candidate_venv), tree(other)) == before
    assert not (overlay / "nvidia").is_symlink() and not (overlay / info).is_symlink()
    for path in ("nvidia/extra/lib.txt", "nvidia/nvtx/lib/libnvtx3interop.so.1",
                 "nvidia/cu13/lib", f"{info}/licenses/License.txt", f"{info}/METADATA"):
        assert (overlay / path).exists(), path
    for root, folders, _ in os.walk(overlay):   # every real folder made is the overlay's own
        assert all(os.path.realpath(os.path.join(root, name)).startswith(str(overlay.resolve()))
                   for name in folders if not os.path.islink(os.path.join(root, name)))


def test_the_tool_lists_real_wheels_changes_one_line_per_reason(wheel_stacks, tmp_path):
    """`rn50-perf bisect --list` run by the reference venv's interpreter against the candidate's:
    the changes, then one `not layered` line per reason."""
    reference_python, candidate_python = map(str, wheel_stacks)
    done = subprocess.run([reference_python, "-m", "tools", "bisect", "--perf-candidate-python",
                           candidate_python, "--list"], cwd=REPO_ROOT,
                          env=repository_importable(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and not done.stderr, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[1].startswith(f"{len(LAYERED)} changes: hidapi: absent -> 0.15.0; iniconfig: ")
    assert lines[2:] == [f"not layered: pytest-cov: absent -> 5.0.0: {PTH_RUNS_CODE}",
                         f"not layered: {ONLY_IN_REFERENCE} (2): tabulate 0.9.0, termcolor 2.4.0"]


class WheelRuns(SyntheticRuns):
    """Synthetic rounds whose stacks are the tool's real layered stacks: each is started once
    through its overlay, and it runs 30% slower where it loads nvidia-nvtx-cu12's library."""
    slow = "nvidia-nvtx-cu12"

    def __init__(self, *arguments):
        super().__init__(*arguments)
        self.seen: dict[Stack, dict] = {}

    def ratio_of(self, stack: Stack) -> float:
        if stack not in self.seen:
            self.seen[stack] = seen_through(stack)
        return 0.70 if self.seen[stack]["nvtx3interop"] else 1.0


def test_a_bisection_over_real_wheels_names_the_one_at_fault(wheel_stacks, tmp_path, monkeypatch,
                                                           capsys):
    """The tool end to end over the candidate venv, its overlays built and started for real and
    only the timing synthetic: the six layered distributions searched to nvidia-nvtx-cu12, the
    candidate's folder the same before and after."""
    from tools.bisect import command as bisect_stack
    monkeypatch.setattr(bisect_stack, "SuiteRuns", WheelRuns)
    candidate_venv = wheel_stacks[1].parent.parent
    before = tree(candidate_venv)
    status = bisect_stack.main(["-k", "1n1g_fp32_b8", "--work-dir", str(tmp_path / "work"),
                                "--perf-candidate-python", str(wheel_stacks[1])])
    printed = capsys.readouterr().out
    assert status == 0, printed
    assert f"not layered: pytest-cov: absent -> 5.0.0: {PTH_RUNS_CODE}" in printed
    answer = [line for line in printed.splitlines() if line.startswith("the slowdown follows")]
    assert len(answer) == 1 and answer[0].startswith(
        "the slowdown follows nvidia-nvtx-cu12==12.9.79 (ratio 0.") and \
        "the other 5 changes: ratio" in answer[0], printed
    assert tree(candidate_venv) == before
