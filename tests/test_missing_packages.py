"""A host without the optional packages (the project's GPU machine has no DALI, ruptures or
mlperf-logging, and no package index): what names a missing piece (rn50_model/packages.py), the
installer `make perf` runs (rn50-perf install-optional), and real sessions and tools started with
those packages hidden from Python, each of which runs, skips or refuses in one line."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import TINY_CASE_ARGS, TOOLS, run_tool
from rn50_model import packages
from rn50_model.packages import compile_problem, dali_distribution, data_backend_problem
from tools import install_optional

HIDDEN = ("nvidia.dali", "ruptures", "mlperf_logging", "plotly")
ONE_RUN = ["--perf-runs", "1", "--perf-set", "max-runs=1"]
CPU_HOST = {"cuda": "unknown", "dali": "unknown", "torchvision": "unavailable: no module"}


@pytest.mark.parametrize("cuda, wheel", [("13.0", "nvidia-dali-cuda130"),
                                         ("12.8", "nvidia-dali-cuda120"),
                                         ("11.8", "nvidia-dali-cuda120"),
                                         ("unknown", "nvidia-dali-cuda120"),
                                         (None, "nvidia-dali-cuda120")])
def test_dalis_wheel_follows_the_cuda_release_of_torch(cuda, wheel):
    assert dali_distribution(cuda) == wheel


def test_a_missing_dali_names_the_wheel_for_this_cuda_and_the_torch_backend_where_it_runs():
    gpu_machine = {"cuda": "13.0", "dali": "unknown", "torchvision": "0.26.0"}
    assert data_backend_problem("dali-gpu", gpu_machine) == (
        "data backend dali-gpu needs NVIDIA DALI, which does not import here (pip install "
        "nvidia-dali-cuda130); torchvision imports here: --perf-data-backend torch reads the same "
        "JPEGs")
    assert data_backend_problem("torch", gpu_machine) is None
    assert data_backend_problem("dali-cpu", CPU_HOST) == (
        "data backend dali-cpu needs NVIDIA DALI, which does not import here (pip install "
        "nvidia-dali-cuda120)")
    assert data_backend_problem("torch", CPU_HOST) == (
        "data backend torch needs torchvision, which does not import here (no module); use "
        "synthetic")
    assert data_backend_problem("torch", {**CPU_HOST, "dali": "2.4.0"}).endswith("use dali-cpu")
    assert data_backend_problem("synthetic", CPU_HOST) is None


def test_torch_compile_without_a_compiler_or_pythons_headers_says_which(monkeypatch, tmp_path):
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setattr(packages.shutil, "which", lambda name: None)
    monkeypatch.setattr(packages.sysconfig, "get_paths", lambda: {"include": str(tmp_path)})
    problem = compile_problem("cuda")
    assert problem.startswith("torch.compile needs a C compiler (Triton builds a helper at "
                              "first use) and Python's headers: no cc / gcc / clang on PATH; "
                              f"no Python.h in {tmp_path} (the python3-dev package")
    (tmp_path / "Python.h").write_text("")
    monkeypatch.setattr(packages.shutil, "which", lambda name: f"/usr/bin/{name}")
    assert compile_problem("cuda") is None
    monkeypatch.setattr(packages.shutil, "which",
                        lambda name: "/usr/bin/gcc" if name == "gcc" else None)
    assert compile_problem("cpu").startswith("torch.compile needs a C++ compiler")


# -- the installer `make perf` runs -----------------------------------------------------------

def test_the_optional_requirements_take_dalis_wheel_for_this_cuda(tmp_path):
    listed = install_optional.requirements(install_optional.REQUIREMENTS, "13.0")
    assert [requirement.spec for requirement in listed] == [
        "nvidia-dali-cuda130>=2.0", "ruptures>=1.1", "mlperf-logging>=4.1", "plotly>=5"]
    assert listed[0].without == "the dali-cpu and dali-gpu data backends skip"
    assert [r.name for r in install_optional.requirements(install_optional.REQUIREMENTS,
                                                           None)][0] == "nvidia-dali-cuda120"


def installer(*args, requirements: Path) -> subprocess.CompletedProcess:
    # No index: as on the GPU machine, pip can install only what is already there.
    return run_tool("install-optional", "--requirements", requirements, *args, timeout=300,
                    env={**os.environ, "PIP_NO_INDEX": "1"})


@pytest.mark.slow
def test_without_an_index_the_installer_keeps_what_is_there_and_names_what_it_left_out(
        tmp_path):
    requirements = tmp_path / "optional.txt"
    requirements.write_text("# two packages\nruptures>=1.1  # installed here\n"
                            "rn50-no-such-package>=1\n")
    done = installer(requirements=requirements)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr
    assert lines[0].startswith("optional packages left out: rn50-no-such-package (what needs "
                               "it skips); the suite runs without them (pip: ERROR: ")
    assert "ruptures" not in lines[0]
    assert installer("--all", requirements=requirements).returncode == 1

    requirements.write_text("ruptures>=1.1\n")
    done = installer("--all", requirements=requirements)
    assert done.returncode == 0 and done.stdout == "optional packages installed: ruptures\n"


def test_a_missing_requirements_file_is_a_usage_error(tmp_path):
    done = installer(requirements=tmp_path / "nope.txt")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"rn50-perf install-optional: error: --requirements {tmp_path / 'nope.txt'}: no "
        "such file (see --help)"]


# -- sessions and tools with the packages hidden ----------------------------------------------

def test_the_hiding_hook_hides_what_it_names_and_nothing_else(hide_packages):
    environment = hide_packages(*HIDDEN)
    probe = ("import importlib\n"
             "for name in ('nvidia.dali', 'ruptures', 'mlperf_logging', 'numpy', 'torch'):\n"
             "    try:\n        importlib.import_module(name); print(name, 'imports')\n"
             "    except ImportError: print(name, 'hidden')\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env=environment, timeout=120)
    assert done.stdout.splitlines() == ["nvidia.dali hidden", "ruptures hidden",
                                        "mlperf_logging hidden", "numpy imports", "torch imports"]


@pytest.mark.slow
def test_the_suite_runs_and_the_dali_backend_skips_with_the_wheel_to_install(run_suite,
                                                                             hide_packages):
    hide_packages(*HIDDEN)
    run = run_suite("-k", "1n1g_fp32", *TINY_CASE_ARGS, *ONE_RUN)
    assert run.outcome.ret == 0, run.output
    assert run.cases["1n1g_fp32_b8"]["verdict"] == "no-baseline"
    assert run.results["environment"]["dali"] == "unknown"

    run = run_suite("-k", "1n1g_fp32", *TINY_CASE_ARGS, *ONE_RUN, "--perf-data-backend", "dali-cpu")
    assert run.outcome.ret == 0, run.output
    run.outcome.stdout.fnmatch_lines(["*data backend dali-cpu needs NVIDIA DALI, which does not "
                                      "import here (pip install nvidia-dali-cuda120)*"])
    assert "Traceback" not in run.output


@pytest.mark.slow
def test_time_to_train_without_dali_skips_with_the_wheel_to_install(run_suite, hide_packages):
    hide_packages(*HIDDEN)
    run = run_suite("--perf-case", "1n1g_fp32_b8_ttt", "-k", "ttt", *ONE_RUN)
    assert run.outcome.ret == 0, run.output
    assert run.cases["1n1g_fp32_b8_ttt"]["verdict"] == "skipped"
    run.outcome.stdout.fnmatch_lines(["SKIPPED*data backend dali-cpu needs NVIDIA DALI, which "
                                      "does not import here (pip install nvidia-dali-cuda120)"])
    assert "Traceback" not in run.output


@pytest.mark.slow
@pytest.mark.parametrize("tool", TOOLS)
def test_every_tool_starts_without_the_optional_packages(tool, hide_packages):
    environment = hide_packages(*HIDDEN)
    done = run_tool(tool, "--help", env=environment)
    assert done.returncode == 0, done.stderr
    # Every tool's usage line names it as a user runs it (issue 60: `usage: rn50-perf bisect`
    # beside `usage: python3 -m tools.options_doc`; issue 58: one command, its verbs).
    assert done.stdout.startswith(f"usage: rn50-perf {tool} ") and \
        "Traceback" not in done.stderr, done.stdout[:200]


@pytest.mark.slow
@pytest.mark.parametrize("tool", ["gpu-check", "gpu-bench"])
def test_the_gpu_tools_refuse_a_cpu_host_in_one_line(tool, hide_packages):
    environment = hide_packages(*HIDDEN)
    done = run_tool(tool, env=environment)
    assert done.returncode != 0
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert len(lines) == 1 and "CUDA" in lines[0], lines


def test_history_without_ruptures_writes_its_tables_and_says_it_searched_no_steps(
        hide_packages, tmp_path):
    from test_history import write_session

    for day, scale in enumerate([1.0, 1.0, 0.8], start=21):
        write_session(tmp_path / "sessions" / f"s{day}", f"2026-11-{day}T10:00:00Z", scale)
    environment = hide_packages(*HIDDEN)
    done = run_tool("history", tmp_path / "sessions", "--output-dir", tmp_path / "out",
                    env=environment)
    assert done.returncode == 0, done.stderr
    unsearched = "step changes not searched: ruptures is not installed (pip install ruptures)"
    assert done.stdout.splitlines()[0] == unsearched
    markdown = (tmp_path / "out" / "history.md").read_text()
    assert f"## Step changes\n\n{unsearched}\n" in markdown and "## 1n1g_fp32_b2" in markdown


def test_publish_without_plotly_says_where_its_chart_library_comes_from(hide_packages,
                                                                         tmp_path):
    from tools.history.site.generated import write_sessions

    write_sessions(tmp_path / "sessions", 3, cases=1)
    done = run_tool("publish", tmp_path / "sessions", "--output", tmp_path / "site",
                    env=hide_packages(*HIDDEN))
    assert done.returncode == 2 and not (tmp_path / "site").exists()
    assert done.stderr == ("rn50-perf publish: error: the site's chart library comes from the "
                           "plotly package, which does not import here; pip install plotly\n")


def test_gpu_check_skips_the_compile_path_without_a_compiler_and_names_dalis_cuda13_wheel(
        monkeypatch):
    import torch

    from tools.gpu import cuda_paths

    no_compiler = "torch.compile needs a C compiler (Triton builds a helper at first use) and ..."
    monkeypatch.setattr(cuda_paths, "compile_problem", lambda device_type: no_compiler)
    monkeypatch.setitem(sys.modules, "nvidia.dali", None)  # import fails: DALI absent
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    host = cuda_paths.Host(1, cuda_paths.library_problems())
    reasons = {path.name: cuda_paths.skip_reason(path, host) for path in cuda_paths.paths(1)}
    assert reasons["torch-compile"] == no_compiler
    assert reasons["dali-gpu"] == reasons["dali-cpu"] == (
        "NVIDIA DALI is not installed (pip install nvidia-dali-cuda130)")
    assert reasons["bf16"] is None and reasons["cuda-graphs"] is None


def test_gpu_bench_skips_the_compiled_variants_without_a_compiler(monkeypatch):
    from tools.gpu import bench as gpu_bench

    measured = []
    monkeypatch.setattr(gpu_bench, "compile_problem", lambda device_type: "no compiler here")
    monkeypatch.setattr(gpu_bench, "measure",
                        lambda settings, runs: measured.append(settings) or {"median_ips": 1.0})
    skipped = gpu_bench.measure_unless_uncompilable({"compile": True}, 3)
    assert skipped["outcome"] == "skipped" and skipped["message"] == "no compiler here"
    assert measured == []
    assert gpu_bench.measure_unless_uncompilable({"cuda_graphs": True}, 3) == {"median_ips": 1.0}
    assert measured == [{"cuda_graphs": True}]


@pytest.mark.slow
def test_a_compiled_case_skips_where_no_compiler_is_on_the_path(run_suite, monkeypatch,
                                                               tmp_path):
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no g++, c++ or clang++: skipped before a launch
    run = run_suite("-k", "1n1g_fp32", *TINY_CASE_ARGS, *ONE_RUN, "--perf-set", "compile=on")
    assert run.outcome.ret == 0, run.output
    assert run.cases["1n1g_fp32_b8"]["verdict"] == "skipped"
    run.outcome.stdout.fnmatch_lines(["SKIPPED*torch.compile needs a C++ compiler (inductor "
                                      "builds its CPU kernels) and Python's headers: no g++ / "
                                      "c++ / clang++ on PATH"])
