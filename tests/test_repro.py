"""A failed case's repro command (perf_tests/cli/repro.py) and which verdicts fail their test
(perf_tests/modes/outcomes.py `fails`). The command is run for real in
tests/test_footprint_sessions.py."""
import shlex
import sys
from pathlib import Path

import pytest

from perf_tests.cli.options import OPTIONS
from perf_tests.cli.repro import NOT_REPEATED, CommandLine, repro_command, typed_values
from perf_tests.cli.settings import Settings
from perf_tests.core.cases import THROUGHPUT, Case
from perf_tests.judging.verdicts import (ERROR, HOST_UNFIT, IMPROVEMENT, INCONCLUSIVE, NO_BASELINE,
                                         OOM, PASS, REGRESSION, SKIPPED)
from perf_tests.modes.outcomes import fails
from perf_tests.results.case_result import CaseResult

NODE = "perf_tests/test_resnet50_training.py::test_training_throughput[1n1g_fp32_b8]"


def test_the_options_typed_are_read_back_as_typed_and_pytest_s_own_passed_over():
    typed = typed_values(("perf_tests", "-k", "1n1g_fp32", "-n", "2", "-p", "no:cacheprovider",
                          "--perf-set", "threads=1", "--perf-runs=5", "--perf-strict",
                          "--perf-candidate-env", "GOMP_SPINCOUNT=300",
                          "--perf-candidate-env=MALLOC_ARENA_MAX=1", "-rA"))
    assert typed == {"threads": "1", "runs": "5", "strict": True,
                     "candidate_env": ["GOMP_SPINCOUNT=300", "MALLOC_ARENA_MAX=1"]}


def test_the_command_names_the_test_the_baseline_and_the_options_that_shaped_it(tmp_path):
    root = tmp_path / "repo"
    (root / "baselines").mkdir(parents=True)
    typed = ("perf_tests", "-k", "1n1g_fp32", "--perf-results", "/tmp/r", "--perf-set",
             "threads=1", "--perf-data-backend", "dali-cpu", "--perf-data-dir", "data/images",
             "--perf-explain=never", "--perf-update-baselines", "--perf-export",
             "bencher=/tmp/b.json")
    command = repro_command(CommandLine(typed, root), root, [NODE],
                            root / "baselines" / "cpu-amd-epyc.json")
    words = shlex.split(command)
    assert words[1:4] == ["-m", "pytest", NODE]
    assert words[0] in ("python3", sys.executable)
    assert words[4:] == ["--perf-baseline-file", "baselines/cpu-amd-epyc.json",
                         "--perf-data-backend", "dali-cpu", "--perf-data-dir", "data/images",
                         "--perf-set", "threads=1", "--perf-explain", "never"]


def test_a_recording_left_unwritten_is_redone_by_its_command(tmp_path):
    """Issue 48: the command of a refused recording records again, as typed, into the same
    file; a failure that is no recording's leaves both options out."""
    typed = ("perf_tests", "--perf-update-baselines=force", "--perf-results", "/tmp/r",
             "--perf-runs", "2")
    redo = repro_command(CommandLine(typed, tmp_path), tmp_path, [NODE],
                         tmp_path / "new.json", recording=True)
    assert shlex.split(redo)[4:] == ["--perf-baseline-file", "new.json", "--perf-runs", "2",
                                     "--perf-update-baselines=force"]
    plain = repro_command(CommandLine(("--perf-update-baselines",), tmp_path), tmp_path, [NODE],
                          tmp_path / "new.json", recording=True)
    assert shlex.split(plain)[-1] == "--perf-update-baselines"
    gate = repro_command(CommandLine(typed, tmp_path), tmp_path, [NODE], tmp_path / "new.json")
    assert shlex.split(gate)[4:] == ["--perf-baseline-file", "new.json", "--perf-runs", "2"]


def test_from_another_folder_the_command_goes_to_the_repository_first(tmp_path):
    """Paths typed relative to where the session ran stay right from the repository root."""
    root, elsewhere = tmp_path / "repo", tmp_path / "work"
    root.mkdir(), elsewhere.mkdir()
    command = repro_command(CommandLine(("--perf-hostfile", "hosts.txt", "--perf-case",
                                         "1n1g_fp32_b8"), elsewhere), root, [NODE],
                            elsewhere / "my-baseline.json")
    assert command.startswith(f"cd {shlex.quote(str(root))} && ")
    words = shlex.split(command.split(" && ", 1)[1])
    assert words[4:] == ["--perf-baseline-file", str(elsewhere / "my-baseline.json"),
                         "--perf-case", "1n1g_fp32_b8",
                         "--perf-hostfile", str(elsewhere / "hosts.txt")]


def test_an_ab_case_names_no_baseline_but_its_candidate(tmp_path):
    command = repro_command(CommandLine(("--perf-candidate-env", "GOMP_SPINCOUNT=300"),
                                        tmp_path), tmp_path, [NODE], None)
    assert "--perf-baseline-file" not in command
    assert command.endswith("--perf-candidate-env GOMP_SPINCOUNT=300")


def test_only_options_that_say_where_results_go_are_left_out():
    """Every other option of the table shapes a measurement or its verdict: a new one is
    repeated unless it is added to NOT_REPEATED on purpose."""
    fields = {option.field for option in OPTIONS}
    assert set(NOT_REPEATED) <= fields
    assert set(NOT_REPEATED) == {"baseline_file", "results", "update_baselines", "exports"}


def result(verdict: str, entry: bool = True, **details) -> CaseResult:
    return CaseResult.judged(Case.parse("1n1g_fp32_b8"), THROUGHPUT, verdict, "line",
                             baseline_entry=object() if entry else None, **details)


@pytest.mark.parametrize("verdict,entry,options,expected", [
    (REGRESSION, True, {}, ""),
    (ERROR, False, {}, ""),
    (OOM, True, {}, ""),
    (OOM, False, {}, None),
    (NO_BASELINE, False, {}, None),
    (NO_BASELINE, False, {"require_baseline": True}, " (--perf-require-baseline)"),
    (INCONCLUSIVE, True, {}, None),
    (INCONCLUSIVE, True, {"strict": True}, " (--perf-strict)"),
    (HOST_UNFIT, True, {"strict": True}, " (--perf-strict)"),
    (HOST_UNFIT, True, {}, None),
    (IMPROVEMENT, True, {"strict": True}, None),
    (PASS, True, {"strict": True}, None),
    (SKIPPED, False, {"strict": True}, None),
])
def test_which_verdicts_fail_their_test(verdict, entry, options, expected):
    assert fails(Settings(**options), result(verdict, entry)) == expected


def test_a_baseline_update_never_fails_on_the_old_entry():
    assert fails(Settings(), result(REGRESSION, baseline_update="16.0 -> 12.0 img/s")) is None


def test_a_failed_case_s_line_ends_with_its_repro(mode_context):
    from perf_tests.modes.outcomes import enforce
    context = mode_context()
    failed = result(REGRESSION, entry=False, repro="python3 -m pytest x").amended(
        message="1n1g_fp32_b8: 12.9 img/s is 19.3% below the baseline 16.0 img/s")
    with pytest.raises(pytest.fail.Exception) as raised:
        enforce(context, failed, fails(context.settings, failed))
    first = str(raised.value).splitlines()[0]
    assert first == (f"{failed.message} [baseline {context.baselines.path}]; "
                     "repro: python3 -m pytest x")
    strict = mode_context(strict=True)
    unclear = result(INCONCLUSIVE, entry=False, repro="python3 -m pytest y")
    with pytest.raises(pytest.fail.Exception) as raised:
        enforce(strict, unclear, fails(strict.settings, unclear))
    assert str(raised.value) == "line (--perf-strict); repro: python3 -m pytest y"


def test_a_context_outside_a_session_has_no_repro(mode_context):
    assert mode_context().repro.command(["1n1g_fp32_b8"], uses_baseline=True) is None


def test_a_context_in_a_session_builds_it(mode_context, tmp_path):
    context = mode_context()
    context.repro.command_line = CommandLine(("--perf-set", "threads=1"), tmp_path)
    context.repro.node_ids["1n1g_fp32_b8"] = NODE
    # No baseline file yet (a first session on a new host): naming it would stop the rerun.
    words = shlex.split(context.repro.command(["1n1g_fp32_b8"], uses_baseline=True))
    assert words[3:] == [NODE, "--perf-set", "threads=1"]
    context.baselines.path.write_text('{"entries": {}}')
    words = shlex.split(context.repro.command(["1n1g_fp32_b8"], uses_baseline=True))
    assert words[3:] == [NODE, "--perf-baseline-file", "baseline.json", "--perf-set",
                         "threads=1"]
    assert Path(tmp_path / words[5]) == context.baselines.path


def test_a_multi_device_case_reruns_after_the_1n1g_case_its_speedup_was_taken_over(
        mode_context, tmp_path):
    """Run alone, a 1n2g case would take its speedup over the baseline's 1n1g median; in the
    session it took it over this session's."""
    from perf_tests.modes.throughput import Throughput
    context = mode_context()
    mode = Throughput(context)
    two = CaseResult.judged(Case.parse("1n2g_fp32_b8"), THROUGHPUT, REGRESSION, "line")
    assert mode.repro_cases(two) == ["1n2g_fp32_b8"]
    context.rows.save(CaseResult.judged(Case.parse("1n1g_fp32_b8"), THROUGHPUT, PASS, "line",
                                        runs_ips=[16.0], median_ips=16.0))
    assert mode.repro_cases(two) == ["1n1g_fp32_b8", "1n2g_fp32_b8"]
    one = CaseResult.judged(Case.parse("1n1g_fp32_b8"), THROUGHPUT, REGRESSION, "line")
    assert mode.repro_cases(one) == ["1n1g_fp32_b8"]


def test_options_from_pytest_addopts_are_repeated(monkeypatch, tmp_path):
    """PYTEST_ADDOPTS is not in pytest's invocation_params; pasted elsewhere, the command would
    lose them (the ini file's addopts apply again by themselves)."""
    monkeypatch.setenv("PYTEST_ADDOPTS", "--perf-strict --perf-case 1n1g_fp32_b1")
    line = CommandLine.of(["perf_tests", "--perf-runs", "5"], tmp_path)
    assert line.args == ("--perf-strict", "--perf-case", "1n1g_fp32_b1", "perf_tests",
                         "--perf-runs", "5")
    assert typed_values(line.args) == {"strict": True, "extra_cases": ["1n1g_fp32_b1"],
                                       "runs": "5"}


def test_a_candidate_interpreter_typed_as_a_relative_path_stays_right_after_the_cd(tmp_path):
    root, elsewhere = tmp_path / "repo", tmp_path / "repo" / "tools"
    elsewhere.mkdir(parents=True)
    command = repro_command(CommandLine(("--perf-candidate-python", "../cand/bin/python"),
                                       elsewhere), root, [NODE], None)
    assert command.endswith("--perf-candidate-python cand/bin/python")
    on_path = repro_command(CommandLine(("--perf-candidate-python", "python3.12"), elsewhere),
                            root, [NODE], None)
    assert on_path.endswith("--perf-candidate-python python3.12")


def test_a_candidate_venvs_python_stays_the_link_it_is(tmp_path):
    """Issue 63's real upgrade: the A/B repro named `--perf-candidate-python
    /root/.pyenv/versions/3.11.7/bin/python3.11`, the base interpreter the candidate venv's
    python links to, which has no torch: the link's own path selects the venv."""
    venv = tmp_path / "cand" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)
    command = repro_command(CommandLine(("--perf-candidate-python", str(venv / "python")),
                                       tmp_path), tmp_path / "repo", [NODE], None)
    assert command.endswith(f"--perf-candidate-python {venv / 'python'}")


def test_python3_is_named_only_where_it_is_this_very_interpreter(monkeypatch, tmp_path):
    """A virtual environment's python3 links to its base interpreter: resolved, the two are one
    file, but only the environment's has its packages."""
    from perf_tests.cli import repro
    base, venv = tmp_path / "base" / "bin", tmp_path / "venv" / "bin"
    base.mkdir(parents=True), venv.mkdir(parents=True)
    (base / "python3").write_text("#!/bin/sh\n")
    (base / "python3").chmod(0o755)
    (venv / "python3").symlink_to(base / "python3")
    monkeypatch.setattr(repro.sys, "executable", str(venv / "python3"))
    monkeypatch.setenv("PATH", str(base))
    assert repro.python_command() == str(venv / "python3")
    monkeypatch.setenv("PATH", str(venv))
    assert repro.python_command() == "python3"
