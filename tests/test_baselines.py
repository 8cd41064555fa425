"""Baseline files: every bad file is one line naming it and is never overwritten; updates keep
every other entry, survive a concurrent session and a session killed mid-write."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from conftest import REPO_ROOT, baseline_document

from perf_tests.baselines import BaselineError, load_baseline_file, update_baseline_file

GOOD = baseline_document({"1n1g_fp32_b8": {"median_ips": 30.0, "runs_ips": [29.0, 30.0, 31.0]}})


def write(path, content):
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


BAD_FILES = {
    "not JSON": ("{schema_version: 1", "is not valid JSON"),
    "truncated": (json.dumps(GOOD)[:40], "is not valid JSON"),
    "a list": ([1, 2], "does not hold a JSON object"),
    "schema 2": ({**GOOD, "schema_version": 2}, "has schema_version 2, this suite reads 1"),
    "no entries": ({"schema_version": 1}, "has no 'entries' object"),
    "no median": (baseline_document({"1n1g_fp32_b8": {"runs_ips": [1.0]}}),
                  "entry 1n1g_fp32_b8 has no positive median_ips"),
    "bad id": (baseline_document({"1n1g-fp32": {"median_ips": 1.0}}),
               "has entry '1n1g-fp32' whose id does not parse"),
    "bad runs": (baseline_document({"1n1g_fp32_b8": {"median_ips": 1.0, "runs_ips": "fast"}}),
                 "runs_ips that are not a list of positive numbers"),
    "bad tolerance": (baseline_document({"1n1g_fp32_b8": {"median_ips": 1.0, "tolerance": 5}}),
                      "has tolerance 5; use a fraction"),
}


@pytest.mark.parametrize("kind", sorted(BAD_FILES))
def test_a_bad_baseline_file_is_one_line_naming_it_and_is_never_overwritten(tmp_path, kind):
    content, words = BAD_FILES[kind]
    path = write(tmp_path / "bad.json", content)
    before = path.read_bytes()
    with pytest.raises(BaselineError) as raised:
        load_baseline_file(path)
    message = str(raised.value)
    assert str(path) in message and words in message and "\n" not in message
    with pytest.raises(BaselineError):
        update_baseline_file(path, "cpu-test", {"1n1g_fp32_b2": {"median_ips": 5.0}})
    assert path.read_bytes() == before


def test_a_directory_is_not_a_baseline_file(tmp_path):
    with pytest.raises(BaselineError, match="is a directory; pass a JSON file"):
        load_baseline_file(tmp_path)


def test_an_unreadable_baseline_file_is_one_line(tmp_path):
    path = write(tmp_path / "locked.json", GOOD)
    path.chmod(0)
    if os.geteuid() != 0:
        with pytest.raises(BaselineError, match="cannot be read"):
            load_baseline_file(path)
        return
    # Root reads files whatever their mode: read it as root without the capabilities that
    # override file permissions.
    if not shutil.which("setpriv"):
        pytest.skip("running as root without setpriv (util-linux) to drop CAP_DAC_OVERRIDE")
    dropped = "-dac_override,-dac_read_search"
    read = subprocess.run(
        ["setpriv", f"--bounding-set={dropped}", f"--inh-caps={dropped}", sys.executable, "-c",
         "import sys\nfrom perf_tests.baselines import BaselineError, load_baseline_file\n"
         "try:\n    load_baseline_file(sys.argv[1])\n"
         "except BaselineError as error:\n    print(error)\n", str(path)],
        cwd=REPO_ROOT, capture_output=True, text=True)
    assert read.returncode == 0, read.stderr
    assert read.stdout == (f"baseline file {path} cannot be read (Permission denied); "
                           "fix its permissions or pass another with --baseline-file\n")


def test_a_missing_file_is_empty_and_created_by_the_first_update(tmp_path):
    path = tmp_path / "sub" / "new.json"
    assert load_baseline_file(path).entries == {}
    update_baseline_file(path, "cpu-test", {"1n1g_fp32_b2": {"median_ips": 5.0}})
    document = json.loads(path.read_text())
    assert document == {"schema_version": 1, "hardware": "cpu-test",
                        "entries": {"1n1g_fp32_b2": {"median_ips": 5.0}}}


def test_a_file_without_schema_version_reads_as_version_1(tmp_path):
    """Only median_ips is required: a hand-written file of entries alone is a baseline file."""
    path = write(tmp_path / "hand-written.json",
                 {"entries": {"1n1g_fp32_b8": {"median_ips": 30.0}}})
    assert load_baseline_file(path).entry("1n1g_fp32_b8").median_ips == 30.0
    shown = subprocess.run([sys.executable, str(REPO_ROOT / "tools" / "report.py"), str(path),
                            "--output-dir", str(tmp_path / "report")],
                           cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert "| 1 | 1 | 8 | fp32 | 30.00 | 1.00 |" in \
        (tmp_path / "report" / "hand-written_report.md").read_text()
    update_baseline_file(path, "cpu-test", {"1n1g_fp32_b2": {"median_ips": 5.0}})
    assert json.loads(path.read_text())["schema_version"] == 1


def test_update_keeps_every_other_entry_and_replaces_its_own(tmp_path):
    path = write(tmp_path / "b.json", baseline_document({
        "1n8g_amp_b256": {"median_ips": 6154.66, "source": "published"},
        "1n1g_fp32_b8": {"median_ips": 1.0}}))
    before = update_baseline_file(path, "other-hardware", {"1n1g_fp32_b8": {"median_ips": 2.0}})
    assert before.entries["1n1g_fp32_b8"] == {"median_ips": 1.0}
    document = json.loads(path.read_text())
    assert document["hardware"] == "test-hardware"  # the file keeps its own key
    assert document["entries"] == {"1n1g_fp32_b8": {"median_ips": 2.0},
                                   "1n8g_amp_b256": {"median_ips": 6154.66, "source": "published"}}


def test_an_update_that_would_write_a_bad_entry_leaves_the_file(tmp_path):
    path = write(tmp_path / "b.json", GOOD)
    with pytest.raises(BaselineError, match="no positive median_ips"):
        update_baseline_file(path, "cpu-test", {"1n1g_fp32_b2": {"median_ips": 0}})
    assert json.loads(path.read_text()) == GOOD


UPDATER = """
import sys
sys.path.insert(0, {root!r})
from perf_tests.baselines import update_baseline_file
name, count = sys.argv[1], int(sys.argv[2])
for index in range(count):
    update_baseline_file({path!r}, "cpu-test", {{f"1n1g_fp32_b{{index + 1}}{{name}}": {{"median_ips": 1.0}}}})
"""


def test_two_sessions_updating_one_file_at_once_both_land(tmp_path):
    path = tmp_path / "shared.json"
    script = UPDATER.format(root=str(REPO_ROOT), path=str(path))
    # Batch ids differ by a digit suffix per writer: writer 1 writes b11..b401, writer 2 b12..b402.
    writers = [subprocess.Popen([sys.executable, "-c", script, name, "40"])
               for name in ("1", "2")]
    assert [writer.wait(timeout=120) for writer in writers] == [0, 0]
    entries = json.loads(path.read_text())["entries"]
    assert len(entries) == 80


KILLED_WRITER = """
import sys
sys.path.insert(0, {root!r})
from perf_tests.storage import write_json_atomically
print("writing", flush=True)
write_json_atomically({path!r}, {{"entries": {{"x" * 64 + str(i): list(range(40)) for i in range(200000)}}}})
"""


def test_a_session_killed_mid_write_leaves_the_old_file_whole(tmp_path):
    path = write(tmp_path / "b.json", GOOD)
    writer = subprocess.Popen([sys.executable, "-c",
                               KILLED_WRITER.format(root=str(REPO_ROOT), path=str(path))],
                              stdout=subprocess.PIPE, text=True)
    assert writer.stdout.readline().strip() == "writing"
    time.sleep(0.3)
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    assert json.loads(path.read_text()) == GOOD
    assert load_baseline_file(path).entry("1n1g_fp32_b8").median_ips == 30.0


@pytest.mark.parametrize("update", [[], ["--update-baselines"]])
def test_a_session_with_a_corrupt_baseline_stops_before_measuring(run_suite, tmp_path, update):
    path = write(tmp_path / "corrupt.json", '{"schema_version": 1, "entries": {')
    run = run_suite(*update, baseline_file=path)
    assert run.outcome.ret == 4
    assert f"ERROR: baseline file {path} is not valid JSON" in run.output
    assert "Traceback" not in run.output
    assert path.read_text() == '{"schema_version": 1, "entries": {'
    assert not (run.results_dir / "results.json").exists()
