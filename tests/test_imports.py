"""How the project's modules import one another: no cycle among perf_tests, rn50_model, tools
and the root conftest.py, read from every import statement (at a module's top and inside its
functions and classes); no folder of perf_tests imports one above it (`LAYERS`,
tools/architecture_doc.py) nor a folder its docstring does not name; no module edits sys.path;
every module's imports stand at its top (no `if not __package__` guard before them); every tool
with a main() is a verb of the one command."""
from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from collections import deque
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from tools.architecture_doc import LAYERS, folder_of, import_edges, project_modules


def import_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The shortest cycle through each module that is on one, each cycle once: ['a', 'b', 'a']."""
    cycles, seen = [], set()
    for start in sorted(edges):
        came_from, queue = {}, deque([start])
        while queue and start not in came_from:
            module = queue.popleft()
            for target in sorted(edges.get(module, ())):
                if target not in came_from:
                    came_from[target] = module
                    queue.append(target)
        if start not in came_from:
            continue
        path = [start]
        while len(path) == 1 or path[-1] != start:
            path.append(came_from[path[-1]])
        cycle = path[::-1]
        key = frozenset(zip(cycle, cycle[1:]))
        if key not in seen:
            seen.add(key)
            cycles.append(cycle)
    return cycles


def test_no_import_cycle_among_the_projects_modules():
    cycles = import_cycles(import_edges(project_modules(REPO_ROOT)))
    assert not cycles, "import cycles among the project's modules:\n" + "\n".join(
        " -> ".join(cycle) for cycle in cycles)


def test_the_check_finds_a_cycle_through_an_import_inside_a_function(tmp_path):
    """A package of four modules: a imports b at its top, b imports a inside a function (a
    cycle), c imports a and the subpackage's d, d imports c by a relative import (a cycle
    through a subpackage); e imports a and nothing imports e."""
    files = {
        "pkg/__init__.py": "",
        "pkg/a.py": "from . import b\n",
        "pkg/b.py": "def late():\n    from pkg.a import helper\n    return helper\n",
        "pkg/c.py": "import pkg.a\nfrom pkg.sub import d\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/d.py": "class Reader:\n    def read(self):\n        from ..c import x\n",
        "pkg/e.py": "import os\nimport pkg.a as a\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    edges = import_edges(project_modules(tmp_path, ("pkg",)))
    assert edges["pkg.e"] == {"pkg.a"} and edges["pkg.sub.d"] == {"pkg.c"}
    assert import_cycles(edges) == [["pkg.a", "pkg.b", "pkg.a"], ["pkg.c", "pkg.sub.d", "pkg.c"]]


def upward_imports(edges: dict[str, set[str]], package: str = "perf_tests",
                   layers: tuple[str, ...] = LAYERS) -> list[str]:
    """'perf_tests.core.text -> perf_tests.cli.options' for each import of a folder above."""
    found = []
    for module, targets in sorted(edges.items()):
        if not module.startswith(package + "."):
            continue
        for target in sorted(targets):
            if target.startswith(package + ".") and layers.index(folder_of(target, layers)) \
                    > layers.index(folder_of(module, layers)):
                found.append(f"{module} -> {target}")
    return found


def test_no_folder_of_perf_tests_imports_a_folder_above_it():
    modules = project_modules(REPO_ROOT)
    folders = {path.name for path in (REPO_ROOT / "perf_tests").iterdir()
               if (path / "__init__.py").exists()}
    assert folders | {""} == set(LAYERS), "a folder without its place in LAYERS: " \
        f"{sorted(folders ^ set(LAYERS) - {''})}"
    edges = import_edges(modules)
    assert not upward_imports(edges), "imports of a folder above:\n" + "\n".join(
        upward_imports(edges))
    below = [f"{module} -> {target}" for module, targets in edges.items()
             if module.startswith("rn50_model") for target in targets
             if target.startswith(("perf_tests", "tools"))]
    up = [f"{module} -> {target}" for module, targets in edges.items()
          if module.startswith("perf_tests") for target in targets if target.startswith("tools")]
    assert not below and not up, below + up


def test_the_layer_check_finds_a_folder_that_imports_one_above(tmp_path):
    """Two folders, low and high: high.b imports low.a (down: allowed); low.c imports high.b
    inside a function (up: a new loop between the folders)."""
    files = {"pkg/__init__.py": "", "pkg/low/__init__.py": "", "pkg/high/__init__.py": "",
             "pkg/low/a.py": "", "pkg/high/b.py": "from pkg.low import a\n",
             "pkg/low/c.py": "def late():\n    from pkg.high.b import x\n"}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    edges = import_edges(project_modules(tmp_path, ("pkg",)))
    assert upward_imports(edges, "pkg", ("low", "high", "")) == ["pkg.low.c -> pkg.high.b"]


def allowed_folders(docstring: str, folder: str) -> set[str] | None:
    """The folders a package's docstring says it may import: those named between "import" and
    "never" (or the sentence's end), every folder below it for "every other"; and the workload,
    rn50_model, which stands below them all, but where it says "nothing of the project". None
    where it says nothing of its imports."""
    clause = re.search(r"\bimports? ([^.]*?)(?:\bnever\b|\.)", " ".join(docstring.split()))
    if not clause:
        return None
    if "nothing of the project" in clause.group(1):
        return set()
    if "every other" in clause.group(1):
        return {*LAYERS[:LAYERS.index(folder)], "rn50_model"}
    return {word for word in re.findall(r"[a-z_]+", clause.group(1)) if word in LAYERS} | {
        "rn50_model"}


def test_each_folder_imports_only_the_folders_its_docstring_names():
    """Issue 65: core's and containers' docstrings said they imported nothing of the project
    while they imported rn50_model; report's left out runs, cli's baselines."""
    edges = import_edges(project_modules(REPO_ROOT))
    wrong = []
    for folder in LAYERS[:-1]:
        package = REPO_ROOT / "perf_tests" / folder / "__init__.py"
        allowed = allowed_folders(ast.get_docstring(ast.parse(package.read_text())) or "", folder)
        assert allowed is not None, f"{package}: its docstring does not say what it may import"
        imported = {folder_of(target) or target.split(".")[0]
                    for module, targets in edges.items()
                    if module.startswith(f"perf_tests.{folder}") and folder_of(module) == folder
                    for target in targets if target.startswith(("perf_tests.", "rn50_model"))}
        wrong += [f"{folder} imports {other}, which its docstring does not name"
                  for other in sorted(imported - allowed - {folder})]
    assert not wrong, "\n".join(wrong)


def test_the_docstring_check_reads_what_a_folder_may_import():
    assert allowed_folders("It may import core,\ncontainers and runs, never a mode.", "cli") == \
        {"core", "containers", "runs", "rn50_model"}
    assert allowed_folders("The top folder: it may import every other.", "runs") == \
        {"core", "containers", "rn50_model"}
    assert allowed_folders("It imports nothing of the project.", "core") == set()
    assert allowed_folders("What a session shows.", "report") is None


def sys_path_edits(path: Path) -> list[int]:
    """Lines that change sys.path: a call on it (insert, append, ...) or an assignment to it."""
    def is_sys_path(node) -> bool:
        return (isinstance(node, ast.Attribute) and node.attr == "path"
                and isinstance(node.value, ast.Name) and node.value.id == "sys")

    lines = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and is_sys_path(node.func.value):
            lines.append(node.lineno)
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            lines += [node.lineno for target in targets if is_sys_path(target)]
    return lines


def test_no_module_of_the_project_edits_sys_path():
    edits = [f"{path.relative_to(REPO_ROOT)}:{line}"
             for path in project_modules(REPO_ROOT).values() for line in sys_path_edits(path)]
    assert not edits, f"sys.path edited at {', '.join(edits)}; run tools as rn50-perf VERB"


def late_imports(path: Path) -> list[int]:
    """Lines of the imports that stand after other code at the module's top level (the
    docstring aside): what an `if not __package__` guard before them, or any code, leaves."""
    body = ast.parse(path.read_text(), str(path)).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    first_code = next((n for n, node in enumerate(body)
                       if not isinstance(node, (ast.Import, ast.ImportFrom))), len(body))
    return [node.lineno for node in body[first_code:]
            if isinstance(node, (ast.Import, ast.ImportFrom))]


def test_every_modules_imports_stand_at_its_top():
    late = [f"{path.relative_to(REPO_ROOT)}:{line}"
            for path in project_modules(REPO_ROOT).values() for line in late_imports(path)]
    assert not late, f"imports after other code at {', '.join(late)}; move them to the top"


def test_the_check_finds_an_import_behind_a_guard(tmp_path):
    module = tmp_path / "tool.py"
    module.write_text('"""A tool."""\nimport sys\n\nif not __package__:\n    sys.exit(1)\n\n'
                      'from tools.cli import OneLineParser\n')
    assert late_imports(module) == [7]


def has_main(path: Path) -> bool:
    return any(isinstance(node, ast.FunctionDef) and node.name == "main"
               for node in ast.parse(path.read_text(), str(path)).body)


def test_every_tool_with_a_main_is_a_verb_of_the_one_command():
    """Issue 58: one console script, `rn50-perf`, whose verbs are every module of tools/ with a
    `main` (but the command's own), each naming itself by its verb."""
    from tools.command import VERBS, verb_command
    with_main = sorted(".".join(path.relative_to(REPO_ROOT).with_suffix("").parts)
                       for path in (REPO_ROOT / "tools").rglob("*.py")
                       if has_main(path) and path != REPO_ROOT / "tools" / "command.py")
    assert with_main == sorted(module for module, _ in VERBS.values())
    scripts = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"rn50-perf": "tools.command:main"}
    for verb, (module, _) in VERBS.items():
        assert f'verb_command("{verb}")' in (REPO_ROOT / (module.replace(".", "/") + ".py")
                                            ).read_text(), verb
    assert verb_command("report") == "rn50-perf report"


@pytest.mark.parametrize("module, verb", [("gpu_check", "gpu-check"), ("calibrate", "calibrate"),
                                          ("promote_baseline", "promote")])
def test_a_tool_typed_as_before_the_one_command_names_its_verb(module, verb):
    """`python3 -m tools.gpu_check` (gone), `tools.calibrate` (a package now) and
    `tools.promote_baseline` (a module still): one line naming the verb, nothing run."""
    done = subprocess.run([sys.executable, "-m", f"tools.{module}", "--measure"],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (f"python3 -m tools.{module} is now a verb of one command: rn50-perf "
                           f"{verb} (python3 -m tools {verb} in a checkout)\n")
