"""docker, for real: sessions whose workers run inside images of a docker daemon the tests start
(tests/docker_daemon.py: Debian's dockerd, a data root, socket and pid file of its own, stopped
at the end with nothing left behind), holding `rn50-a:test` (image `a` of
tests/container_images.py, imported), `rn50-b:test` (`a` with library defaults in its ENV that
slow training on any CPU, and one Debian package more) and `rn50-notorch:test`.

A baseline recorded in `a`; a gate in `a` that passes, on one node and then two simulated ones
until the session is stopped, leaving no container; a gate in `b` that fails naming the image
(its id), the Debian package and the variables as image `b`'s; A/B of `a` against `b`; the
daemon not running, an image not pulled and an image without torch, one line each. Where the
daemon cannot start, these tests skip with its own line."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import TINY_CASE_ARGS, processes_mentioning, run_tool, suite_arguments
from container_images import SLOW_SETTINGS, SLOWER, ImagesUnavailable, built_images
from docker_daemon import (MARKER_PACKAGE, DockerDaemon, DockerUnavailable,
                           docker_available)

# One worker runs them all: the daemon starts once, and its images are imported once.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("docker")]

CASE = "1n1g_fp32_b8"
ARGS = ("-k", "1n1g_fp32", *TINY_CASE_ARGS, "--perf-explain", "never")
TWO_RUNS = ("--perf-runs", "2", "--perf-set", "max-runs=2")


@pytest.fixture(scope="module")
def docker():
    """The tests' own daemon with the test images; skips with the daemon's line where it
    cannot start."""
    reason = docker_available()
    if reason:
        pytest.skip(reason)
    try:
        root = built_images()["a"]
    except ImagesUnavailable as error:
        pytest.skip(str(error))
    daemon = DockerDaemon()
    try:
        daemon.start()
        images = daemon.import_images(root)
    except DockerUnavailable as error:
        daemon.stop()
        pytest.skip(str(error))
    daemon.images = images
    daemon.ids = {name: daemon.docker("image", "inspect", "--format", "{{.Id}}",
                                      image).stdout.strip() for name, image in images.items()}
    yield daemon
    daemon.stop()
    assert not daemon.root.exists()


@pytest.fixture
def on_docker(docker, monkeypatch):
    """The test's sessions talk to the tests' daemon."""
    for name, value in docker.env.items():
        monkeypatch.setenv(name, value)
    return docker


@pytest.fixture(scope="module")
def recorded_in_a(docker, shared_suite):
    """1n1g_fp32_b8 recorded inside `a` from two runs (forced: a baseline wants ten)."""
    return shared_suite(*ARGS, *TWO_RUNS, "--perf-update-baselines=force", "--perf-image",
                        docker.images["a"], env=docker.env)


def identity_of(docker, name: str) -> str:
    """How an environment names a docker image: its name, runtime and id (no registry digest:
    an imported image has none)."""
    return f"{docker.images[name]} [docker: {docker.ids[name]}]"


def test_a_baseline_recorded_inside_a_docker_image_holds_its_environment(docker, recorded_in_a):
    assert recorded_in_a.outcome.ret == 0, recorded_in_a.output
    environment = recorded_in_a.baseline()["entries"][CASE]["environment"]
    assert environment["image"] == identity_of(docker, "a")
    assert environment["os"] == "Debian GNU/Linux 12 (bookworm)"
    assert environment["python"].startswith("3.11.") and environment["container"] == "unnamed"
    assert environment["debian_packages"]["python3"].startswith("3.11")
    assert environment["variables_from_image"] == []
    record = json.loads((recorded_in_a.results_dir / CASE / "run-1.json").read_text())
    run_folder = str(recorded_in_a.results_dir.resolve() / CASE / "run-1")
    assert record["commands"][0][:3] == ["docker", "run", "--rm"]
    assert f"rn50.run={run_folder}" in record["commands"][0]
    assert docker.containers() == []


def test_a_gate_in_another_docker_image_names_it_its_packages_and_the_variables_it_sets(
        on_docker, recorded_in_a, run_suite):
    """The line names the image change (ids), the Debian package `b` added and each variable
    its ENV sets as image `b`'s; the repro sets none of them (the image brings them)."""
    gate = run_suite(*ARGS, *TWO_RUNS, "--perf-tolerance", "0.05", "--perf-image",
                     on_docker.images["b"], baseline=recorded_in_a.baseline())
    row = gate.cases[CASE]
    assert row["verdict"] == "regression" and gate.outcome.ret == 1, row["message"]
    changes = row["environment_diff"].split(", ")
    name, version = MARKER_PACKAGE
    # The fault knob its ENV sets too: a compared variable, the image's.
    fault = dict([SLOWER.split("=", 1)])
    assert changes == [f"image {identity_of(on_docker, 'a')} -> {identity_of(on_docker, 'b')}",
                       f"deb {name} none -> {version}", *(
                           f"{key} unset -> {value} (image {on_docker.images['b']})"
                           for key, value in sorted({**SLOW_SETTINGS, **fault}.items()))]
    [line] = [line for line in gate.output.splitlines() if line.startswith(f"{CASE}: ")]
    assert f"recorded in image {on_docker.images['a']}]; repro: " in line
    repro = line.split("; repro: ")[1]
    assert "env " not in repro and not any(key in repro for key in SLOW_SETTINGS), repro
    assert f"--perf-image {on_docker.images['b']}" in repro
    assert on_docker.containers() == []


def test_a_gate_in_the_same_docker_image_passes_on_one_node_then_two_until_stopped(
        on_docker, recorded_in_a, tmp_path):
    """The gate in `a` against `a`'s entry (a wide band: what it shows is the gate inside the image,
    naming no change; `b`'s gate shows a slowdown caught); then the 2n1g case, each simulated
    node's agent in a container of its own, its workers meeting rank 0's store on 127.0.0.1, the
    host's network; stopped (SIGTERM, as a CI runner cancels) while its second run's containers
    run: the session ends with its finished runs kept, and no container and no process of it is
    left."""
    results = tmp_path / "results"
    baseline = tmp_path / "baseline.json"
    baseline.write_text(recorded_in_a.baseline_file.read_text())
    session = subprocess.Popen(
        [sys.executable, "-m", "pytest", *suite_arguments(
            ["-k", "1n1g_fp32 or 2n1g_fp32", *ARGS[2:], *TWO_RUNS, "--perf-tolerance", "0.6",
             "--perf-image", on_docker.images["a"]], results, baseline, host_state=False)],
        cwd=tmp_path, env={**os.environ, "RN50_PERF_DEVICE_LOCK": str(tmp_path / "lock")},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    second_run = str((results / "2n1g_fp32_b8" / "run-2").resolve())
    deadline = time.monotonic() + 300
    while session.poll() is None and time.monotonic() < deadline and len(
            [line for line in on_docker.containers() if f"rn50.run={second_run}" in line]) < 2:
        time.sleep(0.5)
    assert session.poll() is None, session.communicate()[0]
    session.send_signal(signal.SIGTERM)
    try:
        output, _ = session.communicate(timeout=120)
    except subprocess.TimeoutExpired:   # as test_faults: a signal a finalizer swallowed
        session.send_signal(signal.SIGTERM)
        output, _ = session.communicate(timeout=120)
    assert session.returncode == 2 and "KeyboardInterrupt" in output, output
    passed = json.loads((results / "results.json").read_text())
    row = passed["cases"][CASE]
    assert row["verdict"] in ("pass", "improvement"), row["message"]
    assert row["environment_diff"].startswith("no change in image, "), row["environment_diff"]
    assert passed["interrupted"]["in_case"] == "2n1g_fp32_b8"
    two_nodes = json.loads((results / "2n1g_fp32_b8" / "run-1.json").read_text())
    assert two_nodes["outcome"] == "ok" and len(two_nodes["record"]["per_rank_ips"]) == 2
    assert [command[:3] for command in two_nodes["commands"]] == [["docker", "run", "--rm"]] * 2
    assert on_docker.containers() == [] and processes_mentioning(str(results)) == []


def test_ab_of_two_docker_images_measures_the_slowdown_one_carries(on_docker, run_suite):
    """Each side runs in its own image, and the candidate's image carries a slowdown (its ENV:
    every step twice as long): both pairs measure it. Two pairs, too few for a verdict: the
    call on six pairs of a real slowdown is tests/test_ab.py's local A/B, whose runs cost a
    fraction of a docker run."""
    images = on_docker.images
    run = run_suite(*ARGS, *TWO_RUNS, "--perf-image", images["a"], "--perf-candidate-image",
                    images["b"])
    row = run.cases[CASE]
    assert row["verdict"] == "inconclusive" and run.outcome.ret == 0, row["message"]
    assert "slower than reference, not clearly" in row["message"], row["message"]
    assert "2 pairs: a 95% interval takes 6" in row["message"], row["message"]
    ratios = [candidate / reference for reference, candidate in
              zip(row["reference"]["runs_ips"], row["candidate"]["runs_ips"])]
    assert len(ratios) == 2 and max(ratios) < 0.8, ratios
    assert row["environment_diff"].startswith(
        f"image {identity_of(on_docker, 'a')} -> {identity_of(on_docker, 'b')}, deb ")
    assert row["environment_diff"].endswith(f" (image {images['b']})")
    for side, image in (("reference", "a"), ("candidate", "b")):
        assert row[side]["environment"]["image"] == identity_of(on_docker, image)
        assert row[side]["environment"]["torch"]
    assert run.results["reference"] == f"image {images['a']} (docker)"
    assert run.results["candidate"] == f"image {images['b']} (docker)"
    report = (run.results_dir / "report.md").read_text()
    assert f"reference stack `image {images['a']} (docker)`" in report
    for side, image in (("Reference", "a"), ("Candidate", "b")):
        assert f"{side} environment: image {identity_of(on_docker, image)}" in report, report
    assert not run.baseline_file.exists() and on_docker.containers() == []


@pytest.mark.parametrize("kind", ["daemon not running", "image not pulled", "image without torch"])
def test_a_bad_docker_input_is_one_line_before_anything_is_measured(on_docker, run_suite,
                                                                    monkeypatch, tmp_path, kind):
    images = on_docker.images
    if kind == "daemon not running":
        socket = tmp_path / "no-daemon.sock"
        monkeypatch.setenv("DOCKER_HOST", f"unix://{socket}")
        image, line = images["a"], (
            f"--perf-container-runtime docker: Cannot connect to the Docker daemon at unix://"
            f"{socket}. Is the docker daemon running?; start the daemon (systemctl start "
            "docker, or dockerd), or point DOCKER_HOST at one that runs")
    elif kind == "image not pulled":
        image, line = "rn50-never-pulled:1", (
            "image rn50-never-pulled:1 (docker): docker image inspect rn50-never-pulled:1 "
            "failed: Error response from daemon: no such image: rn50-never-pulled:1: No such "
            "image: rn50-never-pulled:1; build or pull it first, or fix the name")
    else:
        path = "/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        image, line = images["notorch"], (
            f"this session's stack (image {images['notorch']} (docker)): its python3 has no "
            f"torch; python3 was looked up on its ENV PATH {path}; install torch there, name "
            "the interpreter that has it with --perf-image-python PATH, or pick another image")
    run = run_suite(*ARGS, "--perf-update-baselines", "--perf-image", image)
    assert run.outcome.ret == 4, run.output
    assert [text for text in run.outcome.errlines if "ERROR: " in text] == [f"ERROR: {line}"]
    assert not run.baseline_file.exists()
    assert not run.results_dir.exists() or not any(run.results_dir.iterdir())
    assert on_docker.containers() == []


def test_a_bisection_between_two_docker_images_names_the_debian_package_it_cannot_layer(
        on_docker, tmp_path):
    """The variables the images set are components; their files are not (issue 60: the Debian
    package `b` added is named, not searched)."""
    images = on_docker.images
    done = run_tool("bisect", "-k", "1n1g_fp32", "--perf-image", images["a"],
                    "--perf-candidate-image", images["b"], "--list", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    name, version = MARKER_PACKAGE
    assert lines[1].startswith("3 changes: ") and all(
        f"{key}: unset -> {value}" in lines[1] for key, value in SLOW_SETTINGS.items())
    assert lines[2] == (f"not layered: the images' own files ({images['a']} -> {images['b']}: "
                        f"no Python distribution differs; 1 Debian package differs, e.g. {name} "
                        f"none -> {version}): one image's files cannot be layered over "
                        "another's; list the images between them, one a line, in a --stacks "
                        "file to find the first slower one")
