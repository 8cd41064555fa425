"""README.md is the first screen and docs/ the reference: the options page is the one the option
table generates, the architecture page's figures are the tree's, every relative link resolves (to
a file, and to a heading where it names one), the commands the pages give name tools that exist,
and so does every module a page or the code names."""
import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import pytest

from perf_tests.core import rows
from perf_tests.results import measures
from tools import architecture_doc, formats_doc, options_doc
from tools.cli import with_block

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def relative_links(page: Path) -> list[str]:
    """The page's links that point into this repository, outside code blocks."""
    text = FENCE.sub("", page.read_text())
    return [target for target in LINK.findall(text)
            if not re.match(r"[a-z][a-z0-9+.-]*:", target)]


def heading_anchors(page: Path) -> set[str]:
    """GitHub's anchors for the page's headings: lower case, punctuation dropped, spaces as -."""
    text = FENCE.sub("", page.read_text())
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
            for heading in re.findall(r"^#+ (.+)$", text, re.MULTILINE)}


def unresolved(page: Path, target: str) -> str | None:
    """Why `target`, linked from `page`, does not resolve; None where it does."""
    path, _, anchor = target.partition("#")
    file = (page.parent / path).resolve() if path else page
    if not file.exists():
        return f"{page.relative_to(ROOT)}: {target}: no such file"
    if anchor and file.suffix == ".md" and anchor not in heading_anchors(file):
        return f"{page.relative_to(ROOT)}: {target}: no such heading"
    return None


def test_the_options_page_is_the_one_the_option_table_generates():
    assert (DOCS / "options.md").read_text() == options_doc.render(), \
        "docs/options.md is out of date: run rn50-perf options-doc"


def test_the_options_page_lists_every_flag_key_and_old_spelling_by_group():
    from perf_tests.cli.options import GROUPS, RENAMED
    text = (DOCS / "options.md").read_text()
    rows = re.findall(r"^\| `([a-z-][a-z0-9-]+)", text, re.MULTILINE)
    assert rows == [*(row.flag for group in GROUPS for row in (*group.options, *group.keys)),
                    *(old.flag for old in RENAMED)]
    headings = re.findall(r"^## (.+)$", text, re.MULTILINE)
    assert [heading.lower() for heading in headings[:len(GROUPS)]] == \
        [group.title.lower() for group in GROUPS]


def test_the_check_says_in_one_line_that_a_page_is_out_of_date(tmp_path):
    page = tmp_path / "options.md"
    page.write_text(options_doc.render().replace("--perf-runs N", "--perf-runs COUNT"))
    done = subprocess.run([sys.executable, "-m", "tools", "options-doc", "--check", "--page",
                           str(page)], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "rn50-perf options-doc" in done.stderr
    assert options_doc.main(["--page", str(page)]) == 0
    assert options_doc.main(["--check", "--page", str(page)]) == 0


def test_the_architecture_pages_figures_are_the_trees():
    """Issue 65: its sizes and import graph were typed by hand, and went stale."""
    page = (DOCS / "architecture.md").read_text()
    assert page == architecture_doc.with_block(page, architecture_doc.render()), \
        "docs/architecture.md's figures are out of date: run rn50-perf architecture-doc"


def test_the_architecture_figures_read_sizes_and_imports_from_a_tree(tmp_path):
    """runs/protocol imports core inside a function and the workload at its top; core/text is
    401 lines; the page's prose outside the markers is kept."""
    files = {"perf_tests/__init__.py": "", "perf_tests/core/__init__.py": "",
             "perf_tests/plugin.py": "import perf_tests.runs.protocol\n",
             "perf_tests/core/text.py": "x = 1\n" * 401, "perf_tests/runs/__init__.py": "",
             "rn50_model/__init__.py": "", "rn50_model/files.py": "", "tools/__init__.py": "",
             "perf_tests/runs/protocol.py": "import rn50_model.files\n\n\ndef late():\n"
                                            "    from perf_tests.core import text\n"}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    graph = architecture_doc.folder_graph(tmp_path)
    assert (graph["plugin.py"], graph["runs"], graph["core"], graph["tools"]) == \
        (["runs"], ["core", "rn50_model"], [], [])
    block = architecture_doc.render(tmp_path)
    assert "| `perf_tests/core/` | 2 | 401 | `text` |" in block
    assert "Modules over 400 lines: 1 (`perf_tests/core/text.py` 401)" in block
    page = f"prose\n{architecture_doc.BEGIN}\nold\n{architecture_doc.END}\nmore prose\n"
    assert architecture_doc.with_block(page, "new") == \
        f"prose\n{architecture_doc.BEGIN}\nnew\n{architecture_doc.END}\nmore prose\n"


FORMATS_BLOCKS = (f"prose\n{formats_doc.FIELDS_BEGIN}\nold\n{formats_doc.END}\nbetween\n"
                  f"{formats_doc.BEGIN}\nold\n{formats_doc.END}\nmore prose\n")


def test_the_formats_pages_measures_are_the_tables():
    """Issue 65: results.json's measures on the page are the ones every reader asks for."""
    page = (DOCS / "formats.md").read_text()
    assert page == with_block(page, formats_doc.render(), formats_doc.BEGIN, formats_doc.END), \
        "docs/formats.md's measures are out of date: run rn50-perf formats-doc"


def test_the_formats_pages_row_fields_are_the_types():
    """Issue 65: results.json's fields on the page are the row types', each with its type and
    description, the ones every row has first."""
    page = (DOCS / "formats.md").read_text()
    assert page == with_block(page, formats_doc.render_fields(), formats_doc.FIELDS_BEGIN,
                              formats_doc.END), \
        "docs/formats.md's row fields are out of date: run rn50-perf formats-doc"
    fields = page.split(formats_doc.FIELDS_BEGIN)[1].split(formats_doc.END)[0]
    assert fields.startswith("\n**`Row`**, in every row.")
    assert "| `runs_ips` | list of numbers | each timed run's img/s" in fields
    assert "| `ratio_ci` | list of 2 numbers |" in fields
    assert "| `runs_peak_memory_bytes` | list of integers or nulls |" in fields
    assert "**`Side`**, in `reference` and `candidate` of `ab` rows." in fields
    assert "`case_id`" not in fields and "`unknown`" not in fields


def test_a_field_added_to_a_row_type_reaches_the_formats_page(tmp_path, monkeypatch):
    """The types are the only place to edit: the doc's code names no field; a field without a
    description stops the page in one line."""
    page = tmp_path / "formats.md"
    page.write_text(FORMATS_BLOCKS)
    assert formats_doc.main(["--page", str(page)]) == 0

    @dataclasses.dataclass(frozen=True)
    class ImagesRow(rows.ThroughputRow):
        """A throughput row that counts its images."""
        images_seen: tuple[int, ...] = rows.described((), "each run's images")

    monkeypatch.setattr(rows, "ROW_TYPES", {**rows.ROW_TYPES, measures.THROUGHPUT: ImagesRow})
    assert formats_doc.main(["--check", "--page", str(page)]) == 1
    assert formats_doc.main(["--page", str(page)]) == 0
    text = page.read_text()
    assert "**`ImagesRow`**, in `throughput` rows. A throughput row that counts its images." in text
    assert "| `images_seen` | list of integers | each run's images |" in text
    assert text.endswith(f"{formats_doc.END}\nmore prose\n") and "\nbetween\n" in text

    @dataclasses.dataclass(frozen=True)
    class Undescribed(rows.ThroughputRow):
        images_seen: int = 0

    monkeypatch.setattr(rows, "ROW_TYPES", {**rows.ROW_TYPES, measures.THROUGHPUT: Undescribed})
    with pytest.raises(SystemExit, match="Undescribed.images_seen has no description"):
        formats_doc.render_fields()


def test_a_measure_added_to_a_kind_reaches_the_formats_page(tmp_path, monkeypatch):
    """The table is the only place to edit: the doc's code names no measure, and its check
    says in one line that the page is behind."""
    page = tmp_path / "formats.md"
    page.write_text(FORMATS_BLOCKS)
    assert formats_doc.main(["--page", str(page)]) == 0
    assert "| `peak-memory` | peak memory | B | lower | `peak_memory_bytes` |" in page.read_text()
    images = measures.Measure("images", "images seen", "img", "images", True, False,
                              measures.recorded, runs_key="runs_images")
    table = {**measures.MEASURES,
             measures.THROUGHPUT: (*measures.MEASURES[measures.THROUGHPUT], images)}
    monkeypatch.setattr(measures, "MEASURES", table)
    assert formats_doc.main(["--check", "--page", str(page)]) == 1
    assert formats_doc.main(["--page", str(page)]) == 0
    text = page.read_text()
    assert ("| `images` | images seen | img | higher | `images` | `runs_images` | - | - | - | no "
            "| Not judged: recorded and stored. |") in text.split("`ab` rows:")[0]
    assert text.startswith(f"prose\n{formats_doc.FIELDS_BEGIN}\n") and text.endswith(
        f"{formats_doc.END}\nmore prose\n")


def test_the_formats_check_says_in_one_line_that_the_page_is_out_of_date(tmp_path):
    page = tmp_path / "formats.md"
    page.write_text((DOCS / "formats.md").read_text().replace("`median_ips` |", "`ips` |", 1))
    done = subprocess.run([sys.executable, "-m", "tools", "formats-doc", "--check", "--page",
                           str(page)], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "rn50-perf formats-doc" in done.stderr


def test_the_help_lists_the_options_in_the_groups_of_the_page(run_suite):
    """`pytest --help` shows one section a group, every option in it, no old spelling."""
    from perf_tests.cli.options import GROUPS, RENAMED
    text = run_suite("--help").output
    sections = [text.index(f"ResNet50 perf suite: {group.title}:") for group in GROUPS]
    assert sections == sorted(sections)
    for group, start, end in zip(GROUPS, sections, [*sections[1:], len(text)]):
        assert all(f"  {option.flag}" in text[start:end] for option in group.options), group
    assert not [old.flag for old in RENAMED if re.search(f"  {old.flag}[ =,\n]", text)]


def test_the_readme_is_a_first_screen():
    assert len(README.read_text().splitlines()) <= 220


@pytest.mark.parametrize("target", relative_links(README))
def test_every_link_from_the_readme_resolves(target):
    assert unresolved(README, target) is None, unresolved(README, target)


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_every_relative_link_in_the_docs_resolves(page):
    problems = [problem for target in relative_links(page)
                if (problem := unresolved(page, target))]
    assert problems == []


def unclosed_fences(page: Path) -> list[str]:
    """Where a code fence of `page` is not a line of its own: a closing fence with text after it
    (the text joins the code block), an opening fence with more than a language after it, or a
    fence left open at the end."""
    problems, inside = [], False
    for number, line in enumerate(page.read_text().splitlines(), 1):
        stripped = line.strip()
        if not stripped.startswith("```"):
            continue
        rest = stripped[3:]
        if inside and rest or not inside and not re.fullmatch(r"[\w+-]*", rest):
            problems.append(f"{page.name}:{number}: {stripped[:40]}")
        inside = not inside
    return problems + ([f"{page.name}: a fence is left open"] if inside else [])


def test_every_code_fence_is_a_line_of_its_own():
    """Issue 60: docs/bisect.md ran a closing fence into a paragraph ("``` A stacks-file line
    ..."), which became part of the code block."""
    assert [problem for page in [README, *PAGES] for problem in unclosed_fences(page)] == []


def test_the_pages_run_tools_as_verbs_of_the_one_command():
    """Issue 58: one command, `rn50-perf VERB` (`python3 -m tools VERB` in a checkout); every
    verb the pages give exists, and no page runs a tool by a module or a script of its own."""
    from tools.command import VERBS
    pages = [README, *PAGES]
    text = "\n".join(page.read_text() for page in pages)
    named = set(re.findall(r"rn50-perf ([a-z][a-z-]*)", text))
    assert named and named - set(VERBS) == set()
    old = [f"{page.name}: {line.strip()}" for page in pages
           for line in page.read_text().splitlines()
           if re.search(r"python3? tools/|python3? -m tools\.|rn50-perf-[a-z]+ ", line)
           and not line.startswith("The old spellings are gone:")]
    assert old == [], "run tools as rn50-perf VERB"


def test_every_module_the_pages_and_the_code_name_exists():
    """Issue 58: a docstring named modules that had moved (plugin.py's `session_report.py`);
    every `perf_tests/...py`, `tools/...py` and `rn50_model/...py` named in README, docs/ and the
    code is a file (the GPU hours' records, docs/gpu-hours/, are left as they were written)."""
    sources = [README, *PAGES, *ROOT.glob("perf_tests/**/*.py"), *ROOT.glob("tools/**/*.py"),
               *ROOT.glob("rn50_model/*.py"), *ROOT.glob("tests/*.py")]
    named = {(source.name, path) for source in sources for path in
             re.findall(r"(?<![\w/.])((?:perf_tests|tools|rn50_model)/[\w/]+\.py)",
                        source.read_text())}
    assert sorted(f"{source}: {path}" for source, path in named
                  if not (ROOT / path).is_file()) == []


def test_the_sbatch_example_is_a_shell_script():
    example = DOCS / "examples" / "rn50-perf.sbatch"
    assert subprocess.run(["bash", "-n", str(example)]).returncode == 0
    assert "--perf-launcher slurm" in example.read_text()
