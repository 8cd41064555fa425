"""Container images, for real: sessions whose workers run inside images that bwrap (and podman)
run, built offline once per machine (tests/container_images.py): image `a` (Debian's Python 3.11
and this host's torch), image `b` (`a` with library defaults in its environment file that slow
training on any CPU, as an upgraded image's defaults do) and `plain` (no torch).

The stored-baseline gate recorded in `a` and run in `b` names the image change and what changed
inside; A/B of `a` against `b` calls the slowdown, `a` against `a` does not; a missing image, a
runtime not installed, an image without torch and a runtime that cannot start are each one
line before anything is measured, with no baseline written."""
import json
import shutil

import pytest

from conftest import TINY_CASE_ARGS, run_tool
from perf_tests.containers import Image, identity
from container_images import SLOW_SETTINGS, ImagesUnavailable, built_images

# One worker runs them all, one after the other: the first builds the images (1-3 min on a
# fresh machine), and a second worker would only wait for that build.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("containers")]

CASE = "1n1g_fp32_b8"
ARGS = ("-k", "1n1g_fp32", *TINY_CASE_ARGS, "--perf-explain", "never")
# A/B's verdict takes 6 pairs for its 95% interval.
PAIRS = ("--perf-runs", "6", "--perf-set", "max-runs=6")


@pytest.fixture(scope="session")
def images() -> dict:
    try:
        return built_images()
    except ImagesUnavailable as error:
        pytest.skip(str(error))


@pytest.fixture
def podman_conf(tmp_path, monkeypatch):
    """This host's podman configuration: its sandbox does not let a container raise its open
    files limit (podman's default ulimits), and crun refuses its hybrid cgroups, so podman runs
    with runc and the host's limits (../shared/ENVIRONMENT.md); `runtime` replaces runc."""
    missing = [name for name in ("podman", "runc") if shutil.which(name) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed: .ci/install-launchers.sh installs them")

    def configured(runtime: str = "runc"):
        conf = tmp_path / f"containers-{runtime}.conf"
        conf.write_text(f'[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = "{runtime}"\n')
        monkeypatch.setenv("CONTAINERS_CONF", str(conf))
    return configured


def image_of(path, runtime="bwrap") -> str:
    """How the environment names an image, up to its content hash."""
    return f"{path} [{runtime}: content sha256:"


def test_a_gate_recorded_in_one_image_and_run_in_another_names_the_image_change(
        run_suite, images, tmp_path):
    recorded = run_suite(*ARGS, "--perf-runs", "2", "--perf-set", "max-runs=2",
                         "--perf-update-baselines=force", "--perf-image", images["a"])
    assert recorded.outcome.ret == 0, recorded.output
    entry = recorded.baseline()["entries"][CASE]
    # The environment was taken inside the image: its OS and Python, not this host's.
    assert entry["environment"]["image"].startswith(image_of(images["a"]))
    assert entry["environment"]["os"] == "Debian GNU/Linux 12 (bookworm)"
    assert entry["environment"]["python"].startswith("3.11.")
    lock = json.loads((recorded.results_dir / "environment.lock.json").read_text())
    assert lock["image"] == entry["environment"]["image"]
    assert lock["executable"] == "/opt/venv/bin/python3"
    record = json.loads((recorded.results_dir / CASE / "run-1.json").read_text())
    assert record["commands"][0][0] == "bwrap" and "python3" in record["commands"][0]

    gate = run_suite(*ARGS, "--perf-runs", "2", "--perf-set", "max-runs=2", "--perf-tolerance",
                     "0.05", "--perf-image", images["b"], baseline_file=recorded.baseline_file)
    row = gate.cases[CASE]
    assert row["verdict"] == "regression" and gate.outcome.ret == 1, row["message"]
    changes = row["environment_diff"].split(", ")
    assert changes[0].startswith(f"image {image_of(images['a'])}") and \
        f"-> {image_of(images['b'])}" in changes[0], changes
    assert [change for change in changes[1:] if not change.startswith("commit ")] == [
        f"{name} unset -> {value}" for name, value in sorted(SLOW_SETTINGS.items())]
    assert f"; environment: image {images['a']}" in gate.output


def test_ab_of_two_images_calls_the_slowdown_one_carries(run_suite, images):
    run = run_suite(*ARGS, *PAIRS, "--perf-image", images["a"], "--perf-candidate-image",
                    images["b"])
    row = run.cases[CASE]
    assert row["verdict"] == "regression" and run.outcome.ret == 1, row["message"]
    assert row["environment_diff"].startswith(f"image {image_of(images['a'])}")
    for side, image in (("reference", "a"), ("candidate", "b")):
        assert row[side]["environment"]["image"].startswith(image_of(images[image]))
        assert row[side]["environment"]["torch"]
    assert run.results["reference"] == f"image {images['a']} (bwrap)"
    assert run.results["candidate"] == f"image {images['b']} (bwrap)"
    report = (run.results_dir / "report.md").read_text()
    assert f"reference stack `image {images['a']} (bwrap)`" in report
    for side, image in (("Reference", "a"), ("Candidate", "b")):
        assert f"{side} environment: image {image_of(images[image])}" in report, report
    assert not run.baseline_file.exists()


def test_ab_of_an_image_against_itself_raises_no_alarm(run_suite, images):
    run = run_suite(*ARGS, *PAIRS, "--perf-image", images["a"], "--perf-candidate-image",
                    images["a"])
    row = run.cases[CASE]
    assert row["verdict"] in ("pass", "inconclusive"), row["message"]
    assert row["environment_diff"].startswith("no change in"), row["environment_diff"]


def test_podman_runs_the_same_image_as_bwrap_on_two_simulated_nodes(run_suite, images,
                                                                    podman_conf):
    """Each node's agent in a container of its own, meeting the other's over c10d on the
    host's network."""
    podman_conf()
    run = run_suite("-k", "1n1g_fp32 or 2n1g_fp32", *ARGS[2:], "--perf-runs", "1",
                    "--perf-set", "max-runs=1", "--perf-update-baselines=force",
                    "--perf-image", images["a"], "--perf-container-runtime", "podman")
    assert run.outcome.ret == 0, run.output
    two_nodes = json.loads((run.results_dir / "2n1g_fp32_b8" / "run-1.json").read_text())
    assert [command[:3] for command in two_nodes["commands"]] == [["podman", "run", "--rm"]] * 2
    assert run.cases["2n1g_fp32_b8"]["median_ips"] > 0
    environment = run.baseline()["entries"][CASE]["environment"]
    assert environment["image"].startswith(image_of(images["a"], "podman"))
    # The same root, so the same content hash as bwrap gives it (the gate's session above).
    assert environment["image"].split(": ")[1] == identity(Image(str(images["a"]), "bwrap")
                                                            ).split(": ")[1]
    assert environment["os"] == "Debian GNU/Linux 12 (bookworm)"
    record = json.loads((run.results_dir / CASE / "run-1.json").read_text())
    assert record["commands"][0][:3] == ["podman", "run", "--rm"]


@pytest.mark.parametrize("kind", ["missing image", "runtime not installed", "image without torch",
                                  "runtime that cannot start"])
def test_a_bad_image_or_runtime_is_one_line_before_anything_is_measured(
        run_suite, images, podman_conf, tmp_path, kind):
    if kind == "missing image":
        args, line = ("--perf-image", tmp_path / "nowhere"), (
            f"image {tmp_path / 'nowhere'} does not exist; pass a root filesystem folder")
    elif kind == "runtime not installed":
        args, line = ("--perf-image", tmp_path / "new.sif", "--perf-container-runtime",
                      "apptainer"), "--perf-container-runtime apptainer: apptainer is not on PATH"
        assert shutil.which("apptainer") is None
    elif kind == "image without torch":
        args, line = ("--perf-image", images["plain"]), (
            f"this session's stack (image {images['plain']} (bwrap)): its python3 has no torch; "
            "install torch there, or pick another image")
    else:
        podman_conf("no-such-oci-runtime")
        args, line = ("--perf-image", images["a"], "--perf-container-runtime", "podman"), (
            f"probing this session's stack (image {images['a']} (podman)) "
            "(python -m rn50_model.environment) failed: ")
    run = run_suite(*ARGS, "--perf-update-baselines", *args)
    assert run.outcome.ret == 4, run.output
    errors = [text for text in run.outcome.errlines if line in text]
    assert len(errors) == 1, run.output
    assert not run.baseline_file.exists()
    assert not run.results_dir.exists() or not any(run.results_dir.iterdir())


def test_a_bisection_between_two_images_splits_their_variables_and_names_what_it_cannot(
        images, tmp_path):
    """What tools.bisect_stack can split between two images (the variables they set, each
    layered as a setting over the reference's image) and, in one line, what it cannot."""
    done = run_tool("bisect_stack", "-k", "1n1g_fp32", "--perf-image", images["a"],
                    "--perf-candidate-image", images["b"], "--list", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == (f"reference: image {images['a']} (bwrap); candidate: image "
                        f"{images['b']} (bwrap)")
    assert lines[1] == "2 changes: " + "; ".join(
        f"{name}: unset -> {value}" for name, value in sorted(SLOW_SETTINGS.items()))
    assert lines[2] == (f"not layered: the images' own files ({images['a']} -> {images['b']}: "
                        "no Python distribution differs; OS and libraries not compared): one "
                        "image's files cannot be layered over another's; list the images "
                        "between them, one a line, in a --stacks file to find the first slower "
                        "one")
    # A stacks file of images, the known-good first.
    stacks = tmp_path / "images.txt"
    stacks.write_text(f"a: --perf-candidate-image {images['a']}\n"
                      f"b: --perf-candidate-image {images['b']}\n")
    done = run_tool("bisect_stack", "-k", "1n1g_fp32", "--stacks", stacks, "--list",
                    cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"2 stacks; reference: a (image {images['a']} (bwrap))", f"b: image {images['b']} (bwrap)"]
