"""Baseline files: every bad file is one line naming it and is never overwritten; updates keep
every other entry, survive a concurrent session and a session killed mid-write."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import (REPO_ROOT, TINY_CASE_ARGS, baseline_document, run_tool,
                      without_file_permission_override)
from perf_tests.baselines.file import BaselineError, load_baseline_file, update_baseline_file

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
    read = subprocess.run(
        [*without_file_permission_override(), sys.executable, "-c",
         "import sys\nfrom perf_tests.baselines.file import BaselineError, load_baseline_file\n"
         "try:\n    load_baseline_file(sys.argv[1])\n"
         "except BaselineError as error:\n    print(error)\n", str(path)],
        cwd=REPO_ROOT, capture_output=True, text=True)
    assert read.returncode == 0, read.stderr
    assert read.stdout == (f"baseline file {path} cannot be read (Permission denied); "
                           "fix its permissions or pass another with --perf-baseline-file\n")


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
    shown = run_tool("report", path, "--output-dir", tmp_path / "report", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "| 1 | 1 | 8 | fp32 | 30.00 | 1.00 |" in \
        (tmp_path / "report" / "hand-written_report.md").read_text()
    update_baseline_file(path, "cpu-test", {"1n1g_fp32_b2": {"median_ips": 5.0}})
    assert json.loads(path.read_text())["schema_version"] == 1


def test_update_keeps_every_other_entry_and_replaces_its_own(tmp_path):
    path = write(tmp_path / "b.json", baseline_document({
        "1n8g_amp_b256": {"median_ips": 6154.66, "source": "published"},
        "1n1g_fp32_b8": {"median_ips": 1.0}}, hardware="test-hardware"))
    before = update_baseline_file(path, "other-hardware", {"1n1g_fp32_b8": {"median_ips": 2.0}})
    assert before.entries["1n1g_fp32_b8"] == {"median_ips": 1.0}
    document = json.loads(path.read_text())
    assert document["hardware"] == "test-hardware"  # the file keeps its own key
    # The replaced entry is kept in its replacement's lineage (perf_tests/baselines/lineage.py).
    assert document["entries"] == {
        "1n1g_fp32_b8": {"median_ips": 2.0, "lineage": [
            {"median_ips": 1.0, "changed": "unknown (the older entry records no environment)"}]},
        "1n8g_amp_b256": {"median_ips": 6154.66, "source": "published"}}


def test_an_update_that_would_write_a_bad_entry_leaves_the_file(tmp_path):
    path = write(tmp_path / "b.json", GOOD)
    with pytest.raises(BaselineError, match="no positive median_ips"):
        update_baseline_file(path, "cpu-test", {"1n1g_fp32_b2": {"median_ips": 0}})
    assert json.loads(path.read_text()) == GOOD


# Run from the repository root (`python -c` imports from the current folder).
UPDATER = """
import sys
from perf_tests.baselines.file import update_baseline_file
name, count = sys.argv[1], int(sys.argv[2])
for index in range(count):
    entry = {{f"1n1g_fp32_b{{index + 1}}{{name}}": {{"median_ips": 1.0}}}}
    update_baseline_file({path!r}, "cpu-test", entry)
"""


def test_two_sessions_updating_one_file_at_once_both_land(tmp_path):
    path = tmp_path / "shared.json"
    script = UPDATER.format(path=str(path))
    # Batch ids differ by a digit suffix per writer: writer 1 writes b11..b401, writer 2 b12..b402.
    writers = [subprocess.Popen([sys.executable, "-c", script, name, "40"], cwd=REPO_ROOT)
               for name in ("1", "2")]
    assert [writer.wait(timeout=120) for writer in writers] == [0, 0]
    entries = json.loads(path.read_text())["entries"]
    assert len(entries) == 80
    # The lock is released by removing its file: nothing but the baseline is left beside it.
    assert [child.name for child in tmp_path.iterdir()] == ["shared.json"]


KILLED_WRITER = """
import time
from perf_tests.core.storage import write_json_atomically

class StopsMidWrite(dict):
    # json.dump streams a dict's entries into the file as it reads them: once all are out
    # (far more than one buffer's worth, so most are on disk), this one says so and waits
    # there, inside the write, to be killed.
    def items(self):
        yield from super().items()
        print("mid-write", flush=True)
        time.sleep(600)

entries = {{"x" * 64 + str(i): i for i in range(2000)}}
write_json_atomically({path!r}, {{"entries": StopsMidWrite(entries)}})
"""


def test_a_session_killed_mid_write_leaves_the_old_file_whole(tmp_path):
    path = write(tmp_path / "b.json", GOOD)
    writer = subprocess.Popen([sys.executable, "-c", KILLED_WRITER.format(path=str(path))],
                              cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "mid-write"
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait()
    assert json.loads(path.read_text()) == GOOD
    assert load_baseline_file(path).entry("1n1g_fp32_b8").median_ips == 30.0
    # The kill landed inside the write: its temporary file is left beside the old one, begun
    # and not finished.
    left = [child.name for child in tmp_path.iterdir() if child != path]
    assert len(left) == 1 and left[0].startswith(".b.json.") and left[0].endswith(".tmp"), (
        f"one temporary file expected, found {left}: the kill came before or after the write")
    begun = (tmp_path / left[0]).read_text()
    assert begun.startswith("{"), begun[:80]
    with pytest.raises(json.JSONDecodeError):
        json.loads(begun)


@pytest.mark.parametrize("update", [[], ["--perf-update-baselines"]])
def test_a_session_with_a_corrupt_baseline_stops_before_measuring(run_suite, tmp_path, update):
    path = write(tmp_path / "corrupt.json", '{"schema_version": 1, "entries": {')
    run = run_suite(*update, baseline_file=path)
    assert run.outcome.ret == 4
    assert f"ERROR: baseline file {path} is not valid JSON" in run.output
    assert "Traceback" not in run.output
    assert path.read_text() == '{"schema_version": 1, "entries": {'
    assert not (run.results_dir / "results.json").exists()


@pytest.mark.parametrize("what", ["read-only folder", "read-only file"])
def test_an_unwritable_baseline_file_stops_update_baselines_before_measuring(run_suite, tmp_path,
                                                                            what):
    folder = tmp_path / "baselines"
    folder.mkdir()
    path = write(folder / "cpu.json", GOOD)
    if what == "read-only folder":
        folder.chmod(0o555)
    else:
        path.chmod(0o444)
    run = run_suite("-k", "1n1g_fp32", "--perf-update-baselines", *TINY_CASE_ARGS,
                    baseline_file=path, permissions_hold=True)
    assert run.outcome.ret == 4, run.output
    assert (f"ERROR: baseline file {path} cannot be written (Permission denied); make it and "
            "its folder writable, or pass another with --perf-baseline-file") in run.output
    assert "Traceback" not in run.output
    assert not (run.results_dir / "results.json").exists()  # nothing was measured
    assert json.loads(path.read_text()) == GOOD
    assert [child.name for child in folder.iterdir()] == ["cpu.json"]


@pytest.mark.slow
def test_a_baseline_that_cannot_be_written_after_measuring_keeps_the_runs(tmp_path):
    """The folder turns read-only while the runs are measured: the case fails with one line
    saying where its runs are and how to promote them, and the promotion works."""
    folder = tmp_path / "baselines"
    folder.mkdir()
    path = folder / "cpu.json"
    results = tmp_path / "results"
    session = subprocess.Popen(
        [*without_file_permission_override(), sys.executable, "-m", "pytest",
         str(REPO_ROOT / "perf_tests"), "-k", "1n1g_fp32", *TINY_CASE_ARGS, "--perf-runs", "2",
         "--perf-update-baselines=force", "--perf-ignore-host-state",
         "--perf-baseline-file", str(path), "--perf-results", str(results)],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=dict(os.environ, RN50_PERF_DEVICE_LOCK=str(tmp_path / "device-lock")))
    first_run = results / "1n1g_fp32_b8" / "run-1.json"
    deadline = time.monotonic() + 300
    while not first_run.exists() and time.monotonic() < deadline and session.poll() is None:
        time.sleep(0.1)
    folder.chmod(0o555)
    output, _ = session.communicate(timeout=300)
    assert session.returncode == 1, output
    row = json.loads((results / "results.json").read_text())["cases"]["1n1g_fp32_b8"]
    assert row["verdict"] == "error" and len(row["runs_ips"]) == 2
    results_file = results / "results.json"
    command = (f"cd {REPO_ROOT} && rn50-perf promote {results_file} -k "
               f"1n1g_fp32_b8 --baseline-file {path} --force")
    line = (f"1n1g_fp32_b8: baseline file {path} could not be written (Permission denied); its "
            f"2 measured runs are kept in {results_file}: promote them later with ({command})")
    assert any(line in text for text in output.splitlines()), output
    assert "Traceback" not in output
    table_row = next(text for text in output.splitlines() if text.startswith("1n1g_fp32_b8  "))
    assert table_row.split()[-1] == "error"
    assert not path.exists()

    folder.chmod(0o755)
    # The command as the line gives it (2 runs, fewer than the 10 a baseline takes: --force).
    promoted = subprocess.run(["bash", "-c", command.replace("python3", sys.executable)],
                              capture_output=True, text=True)
    assert promoted.returncode == 0, promoted.stdout + promoted.stderr
    stored = load_baseline_file(path).entry("1n1g_fp32_b8").runs_ips
    assert stored == pytest.approx(row["runs_ips"], abs=1e-3)  # entries keep 3 decimals


@pytest.mark.parametrize("path", sorted((REPO_ROOT / "baselines").glob("*.json")),
                         ids=lambda path: path.name)
def test_each_committed_baseline_file_loads_under_its_hardware_key(path):
    """The suite picks baselines/<hardware key>.json on that hardware: a file that does not load,
    or whose key is not its name, would leave that hardware's gate without a baseline."""
    found = load_baseline_file(path)
    assert found.entries
    assert found.hardware == path.stem


@pytest.mark.parametrize("hardware, cases", [
    ("nvidia-h200", ["1n1g_amp_b256", "1n1g_bf16_b256", "1n1g_fp32_b128"]),
    ("nvidia-h100-80gb-hbm3", ["1n1g_amp_b256"]),
])
def test_the_gpu_hours_baselines_are_the_full_protocol_at_224_px(hardware, cases):
    """The baseline files the GPU hours recorded (docs/gpu-hours/: the H200 through `gpu_check
    --measure`, the H100 through `pytest perf_tests -k 1n1g_amp_b256 --perf-update-baselines`): the
    full profile's iterations on synthetic data, so that `pytest perf_tests -k 1n1g` on that
    card compares with them."""
    from perf_tests.core.cases import FULL
    entries = load_baseline_file(REPO_ROOT / "baselines" / f"{hardware}.json").entries
    assert sorted(entries) == cases
    for entry in entries.values():
        settings = entry["settings"]
        assert (settings["profile"], settings["device_type"], settings["data_backend"],
                settings["image_size"], settings["warmup_iters"], settings["timed_iters"]) == (
            "full", "cuda", "synthetic", 224, FULL.warmup_iters, FULL.timed_iters)
        assert len(entry["runs_ips"]) == 3 and entry["op_profile"]["device_type"] == "cuda"


def test_another_machines_entry_is_not_comparable_and_says_what_differs(tmp_path):
    """Issue 63: the same machine is the file's hardware key, the device and, for CPU workers,
    the CPU count; the host's name and the software are not compared."""
    from perf_tests.context.baseline_store import BaselineStore, OtherMachine
    here = {"device": "NVIDIA H200", "hardware": "nvidia-h200", "device_count": 1,
            "cpu_count": 16, "host": "node-7", "torch": "2.13.0"}
    recorded = {**here, "host": "node-3", "cpu_count": 64, "torch": "2.11.0"}
    path = write(tmp_path / "b.json", baseline_document(
        {"1n1g_amp_b256": {"median_ips": 6000.0, "environment": recorded}},
        hardware="nvidia-h200"))
    entry, reason = BaselineStore(path, "nvidia-h200", here).lookup("1n1g_amp_b256", {})
    assert entry is not None and reason == ""   # another node, CPUs and torch: the same card

    elsewhere = {**here, "device": "NVIDIA H100 80GB HBM3", "hardware": "nvidia-h100-80gb-hbm3"}
    entry, reason = BaselineStore(path, "nvidia-h100-80gb-hbm3", elsewhere).lookup(
        "1n1g_amp_b256", {})
    assert entry is None and isinstance(reason, OtherMachine)
    assert reason.differences == (
        "the file is for nvidia-h200, this host is nvidia-h100-80gb-hbm3",
        "device NVIDIA H200 (baseline) vs NVIDIA H100 80GB HBM3")
    assert reason.startswith("not comparable: the baseline for 1n1g_amp_b256 in ")

    cpu = {"device": "AMD EPYC 7B13", "hardware": "cpu-amd-epyc", "device_count": 0,
           "cpu_count": 2}
    path = write(tmp_path / "c.json", baseline_document(
        {"1n1g_fp32_b8": {"median_ips": 20.0, "environment": {**cpu, "cpu_count": 16}}}))
    entry, reason = BaselineStore(path, "cpu-amd-epyc", cpu).lookup("1n1g_fp32_b8", {})
    assert entry is None and reason.differences == ("cpu_count 16 (baseline) vs 2",)
