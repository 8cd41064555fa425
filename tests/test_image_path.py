"""The image path of tools/gpu/check.py (tools/gpu/image_path.py) on this CPU host: the command that
runs its workers inside bwrap over this machine's root, the reasons it skips (no CUDA device, no
bwrap, a bwrap that cannot start), and real bwrap over this root starting this interpreter and
a real worker run inside it."""
import os
import shutil
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT, TINY_WORKER_RUN, run_tool
from tools.gpu.cuda_paths import (FAILED, IMAGE, PASSED, CudaPath, Host, check_paths, paths,
                                  skip_reason)
from tools.gpu.image_path import BRING_BWRAP, IMAGE_READY, image_problem, own_root_stack

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None,
                                 reason="bwrap is not installed (apt-get install bubblewrap)")
NO_CUDA = "a CPU build of torch 2.13.0+cpu sees none here"


def test_the_image_path_is_amp_with_its_workers_in_bwrap_over_this_root(tmp_path):
    path = next(path for path in paths(1) if path.needs == IMAGE)
    assert (path.name, path.changes, path.devices) == ("amp-in-image", {"precision": "amp"}, 1)
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    argv = own_root_stack().wrap(torchrun, {}, (REPO_ROOT, tmp_path), REPO_ROOT)
    at = argv.index(sys.executable)
    assert argv[0] == "bwrap" and argv[at:] == torchrun
    options = argv[:at]
    triples = {tuple(options[index:index + 3]) for index in range(len(options))}
    assert ("--ro-bind", "/usr", "/usr") in triples   # the image: this root, read-only
    for folder in (REPO_ROOT, tmp_path):   # the checkout and the run's folder, writable
        assert ("--bind", str(folder), str(folder)) in triples
    assert options[options.index("--chdir") + 1] == str(REPO_ROOT)
    # This host has no GPU: no device node is passed (on one, each /dev/nvidia* node is).
    assert "--dev-bind" not in options


def test_the_image_path_skips_without_cuda_or_bwrap_and_says_how_to_bring_bwrap():
    image_path = CudaPath("amp-in-image", {"precision": "amp"}, needs=IMAGE)
    amp = CudaPath("amp", {"precision": "amp"})
    assert skip_reason(image_path, Host(0, {IMAGE: None}, NO_CUDA)) == \
        f"no CUDA device: {NO_CUDA}; bwrap starts this python over / here"
    assert skip_reason(image_path, Host(0, {IMAGE: BRING_BWRAP}, NO_CUDA)) == \
        f"no CUDA device: {NO_CUDA}; {BRING_BWRAP}"
    assert skip_reason(amp, Host(0, {IMAGE: None}, NO_CUDA)) == f"no CUDA device: {NO_CUDA}"
    assert skip_reason(image_path, Host(1, {IMAGE: BRING_BWRAP})) == BRING_BWRAP
    assert skip_reason(image_path, Host(1, {IMAGE: None})) is None
    assert BRING_BWRAP.startswith("bwrap is not on PATH: apt-get install bubblewrap, or ")
    assert "copy /usr/bin/bwrap from a Debian 12 machine into a folder carried beside the " \
           "checkout and put that folder on PATH" in BRING_BWRAP


@needs_bwrap
def test_bwrap_over_this_root_starts_this_python_here_or_says_why_not(tmp_path, monkeypatch):
    """Real bwrap carried beside the checkout (a folder of its own on PATH, as on the GPU
    machine; as installed, in the gpu_check test below); none on PATH; and a carried file that
    is no program this kernel runs (an empty one here: a binary for another machine fails
    alike)."""
    python_only = str(Path(sys.executable).parent)
    carried = tmp_path / "carried"
    carried.mkdir()
    shutil.copy2(shutil.which("bwrap"), carried / "bwrap")
    monkeypatch.setenv("PATH", os.pathsep.join([str(carried), python_only]))
    assert image_problem() is None
    monkeypatch.setenv("PATH", python_only)
    assert image_problem() == BRING_BWRAP
    (carried / "bwrap").write_bytes(b"")
    monkeypatch.setenv("PATH", os.pathsep.join([str(carried), python_only]))
    assert image_problem() == (
        f"probing this machine's root as an image (image / (bwrap, python {sys.executable})): "
        "bwrap cannot start (Exec format error)")


@needs_bwrap
def test_gpu_check_shows_the_image_path_skipped_with_its_reason_on_a_cpu_host(tmp_path):
    import torch
    done = run_tool("gpu-check", "--only", "amp-in-image", cwd=tmp_path)
    no_cuda = f"a CPU build of torch {torch.__version__} sees none here"
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines()[-3:] == [
        f"| amp-in-image | skipped | - | no CUDA device: {no_cuda}; {IMAGE_READY} |", "",
        f"no path ran: rn50-perf gpu-check needs a CUDA device; {no_cuda}"]


@needs_bwrap
@pytest.mark.slow
def test_a_path_that_needs_the_image_trains_inside_bwrap_or_fails_with_the_reason(
        tmp_path, monkeypatch):
    """A real worker run through the path check, inside bwrap over this root (fp32 on this CPU
    where the image path trains amp on a GPU); then with a bwrap that cannot start, the same
    path fails with bwrap's reason: the run went through the image."""
    monkeypatch.setenv("RN50_DATA_CACHE", str(tmp_path))
    in_image = CudaPath("fp32-in-image", {"precision": "fp32"}, needs=IMAGE)
    [row] = check_paths([in_image], Host(1, {IMAGE: None}), TINY_WORKER_RUN, 300, None)
    assert row["outcome"] == PASSED and row["ips"] > 0, row["note"]
    carried = tmp_path / "carried"
    carried.mkdir()
    (carried / "bwrap").write_bytes(b"")
    (carried / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", os.pathsep.join([str(carried), str(Path(sys.executable).parent)]))
    [row] = check_paths([in_image], Host(1, {IMAGE: None}), TINY_WORKER_RUN, 300, None)
    assert row["outcome"] == FAILED
    assert row["note"].startswith("error: bwrap cannot start (Exec format error): bwrap ")
