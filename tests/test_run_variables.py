"""The environment variables a verdict compares (perf_tests/runs/variables.py): which are
compared, how a change reads in the failure line and in A/B's table, the `env` prefix of a
repro command, and that the header and every run's record carry the one set the session read
through the stack, not what a worker's own environment held."""
import json
import os
import shlex
import sys
from functools import partial
from pathlib import Path

from conftest import REPO_ROOT
from perf_tests.cli.repro import CommandLine, repro_command
from perf_tests.cli.settings import Settings
from perf_tests.core.cases import Case
from perf_tests.environment import lock as environment_lock
from perf_tests.environment.differences import environment_diff, recorded_in
from perf_tests.environment.lock import LOCK_FILE, set_by_image
from perf_tests.modes.ab import AB
from perf_tests.results.folder import ResultsFolder
from perf_tests.runs.launch import Launcher, LaunchRequest, Stack
from perf_tests.runs.protocol import run_rounds
from perf_tests.runs.variables import compared_variables, env_prefix, with_variables
from perf_tests.session import session as session_module
from perf_tests.session.session import PerfSession
from rn50_model.stack_lock import WITHHELD, run_shaping_variables

NODE = "perf_tests/test_resnet50_training.py::test_training_throughput[1n1g_fp32_b8]"


def test_the_families_that_shape_a_run_are_compared_less_placement_interfaces_and_versions():
    environ = {"DNNL_MAX_CPU_ISA": "SSE41", "ONEDNN_VERBOSE": "0", "OMP_NUM_THREADS": "4",
               "KMP_AFFINITY": "compact", "GOMP_SPINCOUNT": "0", "MKL_DEBUG_CPU_TYPE": "5",
               "OPENBLAS_NUM_THREADS": "1", "NCCL_ALGO": "Ring", "CUDNN_LOGINFO_DBG": "0",
               "CUBLAS_WORKSPACE_CONFIG": ":4096:8", "CUBLASLT_LOG_LEVEL": "0",
               "CUDA_MODULE_LOADING": "LAZY", "NVIDIA_TF32_OVERRIDE": "0",
               "TORCH_CUDNN_V8_API_DISABLED": "1", "TORCHINDUCTOR_MAX_AUTOTUNE": "1",
               "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "MALLOC_ARENA_MAX": "2",
               "LD_LIBRARY_PATH": "/opt/cudnn/lib", "LD_PRELOAD": "/usr/lib/libtcmalloc.so",
               "GLIBC_TUNABLES": "glibc.malloc.hugetlb=1",
               # placement, interfaces, versions, caches, the suite's own (but its fault
               # knob), the launchers'
               "CUDA_VISIBLE_DEVICES": "0,1", "NVIDIA_VISIBLE_DEVICES": "all",
               "NCCL_SOCKET_IFNAME": "eth0", "GLOO_SOCKET_IFNAME": "eth0",
               "CUDA_VERSION": "13.0.0", "CUDNN_VERSION": "9.10", "NCCL_VERSION": "2.27",
               "NVIDIA_BUILD_ID": "177567386", "PYTORCH_BUILD_NUMBER": "0",
               "NVIDIA_PYTORCH_VERSION": "25.08", "NVIDIA_REQUIRE_CUDA": "cuda>=13.0",
               "NVIDIA_DRIVER_CAPABILITIES": "compute,utility", "TORCH_HOME": "/root/.cache",
               "TORCHINDUCTOR_CACHE_DIR": "/tmp/job-42/torchinductor_root",
               "CUDA_CACHE_PATH": "/tmp/job-42", "RN50_FAULT": "slow@share=0.1",
               "PYTHONPATH": "/work/main", "SLURM_JOB_ID": "42", "MASTER_PORT": "29500",
               "NVIDIA_API_KEY": "nvapi-secret"}
    compared = compared_variables({"variables": run_shaping_variables(environ)})
    assert sorted(compared) == [
        "CUBLASLT_LOG_LEVEL", "CUBLAS_WORKSPACE_CONFIG", "CUDA_MODULE_LOADING",
        "CUDNN_LOGINFO_DBG", "DNNL_MAX_CPU_ISA", "GLIBC_TUNABLES", "GOMP_SPINCOUNT",
        "KMP_AFFINITY", "LD_LIBRARY_PATH", "LD_PRELOAD", "MALLOC_ARENA_MAX",
        "MKL_DEBUG_CPU_TYPE", "NCCL_ALGO", "NVIDIA_API_KEY", "NVIDIA_TF32_OVERRIDE",
        "OMP_NUM_THREADS", "ONEDNN_VERBOSE", "OPENBLAS_NUM_THREADS", "PYTORCH_CUDA_ALLOC_CONF",
        "RN50_FAULT", "TORCHINDUCTOR_MAX_AUTOTUNE", "TORCH_CUDNN_V8_API_DISABLED"]
    assert compared["NVIDIA_API_KEY"] == WITHHELD   # as the lock holds it


def test_a_stack_that_could_not_be_read_compares_nothing():
    assert compared_variables({"error": "probing the candidate ... failed"}) is None
    assert with_variables({"torch": "2.11.0"}, None) == {"torch": "2.11.0"}
    assert with_variables({"torch": "2.11.0", "variables": {"OMP_NUM_THREADS": "1"}},
                          {}) == {"torch": "2.11.0", "variables": {}}


def test_the_failure_line_names_each_variable_changed_and_an_older_entry_none():
    before = {"torch": "2.11.0", "variables": {"OMP_NUM_THREADS": "4", "NCCL_ALGO": "Ring"}}
    after = {"torch": "2.11.0", "variables": {"NCCL_ALGO": "Tree", "DNNL_MAX_CPU_ISA": "SSE41"}}
    assert environment_diff(before, after) == \
        "DNNL_MAX_CPU_ISA unset -> SSE41, NCCL_ALGO Ring -> Tree, OMP_NUM_THREADS 4 -> unset"
    assert environment_diff({**before, "torch": "2.10.0"}, {**before, "torch": "2.11.0"}) == \
        "torch 2.10.0 -> 2.11.0"
    assert environment_diff(before, before) == "no change in torch, variables"
    # An entry recorded before the variables were: nothing is named, nothing claimed compared.
    assert environment_diff({"torch": "2.11.0"}, after) == "no change in torch"
    # A secret's value was never recorded: only its coming or going is seen.
    secret = {"torch": "2.11.0", "variables": {"NVIDIA_API_KEY": WITHHELD}}
    assert environment_diff({"torch": "2.11.0", "variables": {}}, secret) == \
        f"NVIDIA_API_KEY unset -> {WITHHELD}"


def test_the_repro_sets_what_the_session_had_and_unsets_what_it_lacked(tmp_path):
    baseline = {"variables": {"OMP_NUM_THREADS": "4", "NCCL_ALGO": "Ring", "MKL_X": "1"}}
    session = {"variables": {"NCCL_ALGO": "Tree", "DNNL_MAX_CPU_ISA": "SSE41", "MKL_X": "1",
                             "NVIDIA_API_KEY": WITHHELD, "LD_PRELOAD": "/opt/a b.so"}}
    words = env_prefix(baseline, session)
    assert words == ["env", "-u", "OMP_NUM_THREADS", "DNNL_MAX_CPU_ISA=SSE41",
                     "LD_PRELOAD=/opt/a b.so", "NCCL_ALGO=Tree"]
    assert env_prefix(baseline, baseline) == [] and env_prefix({}, session) == []
    root = tmp_path / "repo"
    command = repro_command(CommandLine(("--perf-set", "threads=1"), tmp_path), root, [NODE],
                            root / "b.json", words)
    cd, rest = command.split(" && ")
    assert cd == f"cd {root}"
    assert shlex.split(rest)[:7] == [*words, shlex.split(rest)[6]]
    assert shlex.split(rest)[7:] == ["-m", "pytest", NODE, "--perf-baseline-file", "b.json",
                                     "--perf-set", "threads=1"]


def test_a_variable_an_image_set_is_named_as_the_image_s_and_left_off_the_repro():
    """The image brings it wherever it runs, so the repro's shell does not set it; one the
    shell set keeps its `env K=V` (issue 56)."""
    baseline = {"image": "/srv/images/a [bwrap: content sha256:61ff508ef14e]",
                "variables": {"NCCL_ALGO": "Tree"}, "variables_from_image": ["NCCL_ALGO"]}
    session = {"image": "/srv/images/b [bwrap: content sha256:35929a5fb24b]",
               "variables": {"CUDA_LAUNCH_BLOCKING": "1", "OMP_NUM_THREADS": "2"},
               "variables_from_image": ["CUDA_LAUNCH_BLOCKING"]}
    assert environment_diff(baseline, session).split(", ")[1:] == [
        "CUDA_LAUNCH_BLOCKING unset -> 1 (image b)", "NCCL_ALGO Tree (image a) -> unset",
        "OMP_NUM_THREADS unset -> 2"]
    assert env_prefix(baseline, session) == ["env", "-u", "NCCL_ALGO", "OMP_NUM_THREADS=2"]
    docker = {**session, "image": "nvcr.io/nvidia/pytorch:24.12-py3 [docker: sha256:0c9f]"}
    assert "CUDA_LAUNCH_BLOCKING unset -> 1 (image pytorch:24.12-py3)" in environment_diff(
        baseline, docker)


def test_the_diff_names_the_debian_packages_two_images_differ_in():
    """Added, removed, of another version: the GPU libraries' first, then a count of the rest
    (issue 60: NGC's CUDA, cuDNN and NCCL are Debian packages)."""
    before = {"debian_packages": {"bash": "5.2.15-2", "fuse3": "3.14.0-4", "libnccl2": "2.23.4",
                                  **{f"lib{n}": "1" for n in "abcdef"}}}
    after = {"debian_packages": {"bash": "5.2.15-2", "libcudnn9-cuda-12": "9.6.0.74-1",
                                 "libnccl2": "2.23.4+cuda12.6",
                                 **{f"lib{n}": "2" for n in "abcdef"}}}
    assert environment_diff(before, after).split(", ") == [
        "deb libcudnn9-cuda-12 none -> 9.6.0.74-1", "deb libnccl2 2.23.4 -> 2.23.4+cuda12.6",
        "deb fuse3 3.14.0-4 -> none", "deb liba 1 -> 2", "deb libb 1 -> 2", "deb libc 1 -> 2",
        "deb: 3 more packages differ (the environment lock lists them)"]
    # A side that did not record them (the host, an older entry): nothing is named.
    assert environment_diff({"torch": "2.11", **before}, {"torch": "2.11"}) == \
        "no change in torch"


def test_the_gate_line_says_where_an_entry_was_recorded_where_that_was_another_stack():
    """One baseline file keeps one entry a case, whatever stack recorded it (issue 60)."""
    host, a = {"torch": "2.11"}, {"image": "/srv/images/a [bwrap: content sha256:61ff508ef14e]"}
    b = {"image": "/srv/images/b [bwrap: content sha256:35929a5fb24b]"}
    rebuilt_a = {"image": "/srv/images/a [bwrap: content sha256:0123456789ab]"}
    assert recorded_in(a, b) == "recorded in image /srv/images/a"
    assert recorded_in(a, host) == "recorded in image /srv/images/a"
    assert recorded_in(host, b) == "recorded on the host"
    assert recorded_in(a, rebuilt_a) == f"recorded in image {a['image']}"
    assert recorded_in(a, a) == recorded_in(host, host) == recorded_in({}, b) == ""


def test_which_variables_the_image_set(monkeypatch):
    """Its value, and neither the shell nor the stack's settings gave that one; a variable only
    the image may set (LD_LIBRARY_PATH) is the image's whenever the values agree."""
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    monkeypatch.setenv("LD_LIBRARY_PATH", "/host/lib")
    monkeypatch.delenv("NCCL_ALGO", raising=False)
    variables = {"NCCL_ALGO": "Tree", "OMP_NUM_THREADS": "2", "LD_LIBRARY_PATH": "/usr/lib/x",
                 "DNNL_MAX_CPU_ISA": "AVX2", "CUDA_LAUNCH_BLOCKING": "1"}
    image_sets = {"NCCL_ALGO": "Tree", "OMP_NUM_THREADS": "2", "LD_LIBRARY_PATH": "/usr/lib/x",
                  "DNNL_MAX_CPU_ISA": "AVX2", "CUDA_LAUNCH_BLOCKING": "0"}
    stack = Stack(env=(("DNNL_MAX_CPU_ISA", "AVX2"),))
    assert set_by_image(variables, image_sets, stack) == ["LD_LIBRARY_PATH", "NCCL_ALGO"]


def test_a_b_s_table_names_what_differs_where_something_does():
    row = {"kind": "ab", "nodes": 1, "gpus_per_node": 1, "batch_per_device": 8,
           "precision": "fp32", "pairs": 4, "verdict": "regression",
           "reference": {"median_ips": 40.0}, "candidate": {"median_ips": 22.0},
           "environment_diff": "DNNL_MAX_CPU_ISA unset -> SSE41"}
    header, _, line = AB.terminal_lines({"1n1g_fp32_b8": row})[:3]
    assert header.split()[-3:] == ["what", "differs", "verdict"]
    assert line.split("  ")[-2:] == ["DNNL_MAX_CPU_ISA unset -> SSE41", "regression"]
    same = {**row, "environment_diff": "no change in device, variables"}
    assert "what differs" not in AB.terminal_lines({"1n1g_fp32_b8": same})[0]


def test_a_long_difference_is_named_in_the_column_and_given_in_full_under_the_table():
    """Issue 60: two images' paths and digests ran the column to 220 characters."""
    from perf_tests.environment.differences import environment_diff
    from perf_tests.report.ab import DIFFERS_WIDTH
    images = "/root/.cache/rn50_perf/images/20339a88b265/{} [bwrap: content sha256:{}]"
    reference = {"image": images.format("a", "61ff508ef14e"), "variables": {}}
    candidate = {"image": images.format("b", "35929a5fb24b"), "variables": {
        "ATEN_CPU_CAPABILITY": "default", "ONEDNN_PRIMITIVE_CACHE_CAPACITY": "0"}}
    row = {"kind": "ab", "nodes": 1, "gpus_per_node": 1, "batch_per_device": 8,
           "precision": "fp32", "pairs": 8, "verdict": "regression",
           "reference": {"median_ips": 40.0, "environment": reference},
           "candidate": {"median_ips": 22.0, "environment": candidate},
           "environment_diff": environment_diff(reference, candidate)}
    header, rule, line, _, under = AB.terminal_lines({"1n1g_fp32_b8": row,
                                                      "1n2g_fp32_b8": row})[:5]
    assert line.split("  ")[-2:] == ["image, ATEN_CPU_CAPABILITY, +1", "regression"]
    assert len(rule.split()[-2]) <= DIFFERS_WIDTH
    assert under == f"what differs in 1n1g_fp32_b8, 1n2g_fp32_b8: {row['environment_diff']}"
    assert f"- what differs in 1n1g_fp32_b8: {row['environment_diff']}" in AB.markdown(
        {"1n1g_fp32_b8": row})


# A worker's record, with what torchrun and torch add to a worker's environment in it.
WORKER = """
import json, os, sys
record = {"outcome": "ok", "global_ips": 10.0, "environment": {"torch": "2.11.0", "variables": {
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1", "TORCHINDUCTOR_CACHE_DIR": "/tmp/x"}}}
json.dump(record, open(os.path.join(sys.argv[1], "record.json"), "w"))
"""


class OneProcess(Launcher):
    name = "stand-in"

    def skip_reason(self, case, host):
        return None

    def commands(self, request):
        return [("agent0", [sys.executable, "-c", WORKER, str(request.run_dir)])]


def test_a_run_s_record_carries_its_stack_s_variables_not_the_worker_s_own(tmp_path):
    case = Case(1, 1, "fp32", 8)
    results = ResultsFolder(tmp_path / "results")
    stacked = {"DNNL_MAX_CPU_ISA": "SSE41"}

    def request_for(run_dir: Path) -> LaunchRequest:
        return LaunchRequest(case=case, worker_args=[], run_dir=run_dir, env=dict(os.environ),
                             cwd=tmp_path, timeout=30, variables=stacked)

    runs = run_rounds(case, OneProcess(), request_for, partial(results.run_dir, case.case_id), 1, 1)
    assert runs.runs[0].record["environment"] == {"torch": "2.11.0", "variables": stacked}
    saved = json.loads((results.path / case.case_id / "run-1.json").read_text())
    assert saved["record"]["environment"]["variables"] == stacked


def test_the_header_and_the_lock_come_from_one_reading_of_the_stack(monkeypatch, tmp_path):
    """Read through the stack as a worker is started (the lock's reading), once: the header's
    environment holds the compared variables (the probe's own environment is not asked), and
    the lock keeps every variable that shapes a run."""
    monkeypatch.setenv("DNNL_MAX_CPU_ISA", "SSE41")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setenv("CUDNN_VERSION", "9.10")
    monkeypatch.setattr(session_module, "probe_host", lambda rootdir, *stack: {
        "device_count": 0, "cpu_count": 2, "hardware": "cpu-test",
        "variables": {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"}})
    reads = []
    real_run_probe = environment_lock.run_probe
    monkeypatch.setattr(environment_lock, "run_probe",
                        lambda *args, **kwargs: reads.append(args) or real_run_probe(*args,
                                                                                     **kwargs))
    monkeypatch.setattr(session_module, "measure", lambda mode, case: None)
    results = tmp_path / "results"
    session = PerfSession(Settings(), REPO_ROOT, results)
    variables = session.context.host.environment["variables"]
    assert variables["DNNL_MAX_CPU_ISA"] == "SSE41"
    assert not {"CUDA_VISIBLE_DEVICES", "CUDNN_VERSION",
                "TORCH_NCCL_ASYNC_ERROR_HANDLING"} & set(variables)
    assert session.context.workers.stack_variables(Stack()) == variables
    session.measure(session.cases("perf_case")[0])
    lock = json.loads((results / LOCK_FILE).read_text())
    assert {"DNNL_MAX_CPU_ISA", "CUDA_VISIBLE_DEVICES", "CUDNN_VERSION"} <= set(lock["variables"])
    assert len(reads) == 1
