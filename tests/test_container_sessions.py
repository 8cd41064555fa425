"""Container images, for real: sessions whose workers run inside images that bwrap (and podman)
run, built offline once per machine (tests/container_images.py): image `a` (Debian's Python 3.11
and this host's torch), image `b` (`a` with library defaults in its environment file that slow
training, as an upgraded image's defaults do, and the fault knob that halves it on any CPU),
`nohosts` (`a` without /etc/hosts, as debootstrap's minbase leaves a root) and `plain` (no
torch).

The stored-baseline gate recorded in `a` (by the suite installed with pip, run from a folder
outside the checkout) and run in `b` names the image change and what changed inside, the
variables as the image's; A/B of `nohosts` against itself, on a host whose name resolves
nowhere, raises no alarm; podman runs `a` on two simulated nodes; a missing image, a runtime not
installed, an image without torch or without the interpreter and a runtime that cannot start are
each one line before anything is measured, with no baseline written. A/B of two images that
calls the slowdown runs under docker (tests/test_docker_sessions.py)."""
import json
import shutil
import socket
import subprocess
import sys

import pytest

from conftest import REPO_ROOT, TINY_CASE_ARGS, run_tool
from container_images import SLOW_SETTINGS, SLOWER, ImagesUnavailable, built_images, cache_home
from perf_tests.containers import Image, identity

# One worker runs them all, one after the other: the first builds the images (1-3 min on a
# fresh machine), and a second worker would only wait for that build.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("containers")]

CASE = "1n1g_fp32_b8"
ARGS = ("-k", "1n1g_fp32", *TINY_CASE_ARGS, "--perf-explain", "never")
# What image `b`'s environment file sets: the library defaults and the fault knob.
B_VARIABLES = {**SLOW_SETTINGS, **dict([SLOWER.split("=", 1)])}


@pytest.fixture(scope="session")
def images() -> dict:
    try:
        return built_images()
    except ImagesUnavailable as error:
        pytest.skip(str(error))


@pytest.fixture(autouse=True)
def identities_cached(monkeypatch):
    """The sessions' cache is the images' own (a session's HOME is its test's folder): each
    image's identity, a hash of its 1.3 GB, is read there, as container_images.py left it."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache_home()))


@pytest.fixture(scope="module")
def installed_suite(tmp_path_factory) -> str:
    """The suite as `pip install` puts it into another environment: its three packages in a
    site-packages folder of their own (--target), built from a copy of the checkout, so that
    nothing is written into it."""
    work = tmp_path_factory.mktemp("installed")
    source = work / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "requirements.txt", "requirements-optional.txt",
                 "requirements-test.txt"):
        shutil.copy(REPO_ROOT / name, source / name)
    for name in ("perf_tests", "rn50_model", "tools"):
        shutil.copytree(REPO_ROOT / name, source / name,
                        ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                           "--no-build-isolation", "--target", str(work / "site"), str(source)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return str(work / "site")


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


def test_a_gate_recorded_in_one_image_by_the_installed_suite_and_run_in_another_names_the_image(
        run_suite, images, installed_suite, monkeypatch):
    """The recording: the suite installed with pip, from a folder outside the checkout (its
    packages reach the image, not the host's site-packages: issue 60). The gate, in `b`, from
    the checkout: the line names the image change, the variables as image `b`'s, where the
    entry was recorded, and its repro sets none of them (the image brings them: issue 56)."""
    with monkeypatch.context() as installed:
        installed.setenv("PYTHONPATH", installed_suite)   # the installed copy, not the checkout
        recorded = run_suite(*ARGS, "--perf-runs", "2", "--perf-set", "max-runs=2",
                             "--perf-update-baselines=force", "--perf-image", images["a"],
                             suite=("--pyargs", "perf_tests"))
    assert recorded.outcome.ret == 0, recorded.output
    entry = recorded.baseline()["entries"][CASE]
    # The environment was taken inside the image: its OS and Python, not this host's.
    assert entry["environment"]["image"].startswith(image_of(images["a"]))
    assert entry["environment"]["os"] == "Debian GNU/Linux 12 (bookworm)"
    assert entry["environment"]["python"].startswith("3.11.")
    lock = json.loads((recorded.results_dir / "environment.lock.json").read_text())
    assert lock["image"] == entry["environment"]["image"]
    assert lock["executable"] == "/opt/venv/bin/python3"
    assert lock["debian_packages"]["python3"].startswith("3.11")
    command = json.loads((recorded.results_dir / CASE / "run-1.json").read_text())["commands"][0]
    assert command[0] == "bwrap" and "python3" in command
    # The workers imported the installed packages through a folder of links to them.
    [pythonpath] = [word for word in command if word.startswith("PYTHONPATH=")]
    links = pythonpath.removeprefix("PYTHONPATH=").split(":")[0]
    assert f"--bind {installed_suite}/rn50_model {installed_suite}/rn50_model" in " ".join(
        command) and f"--bind {links} {links}" in " ".join(command)
    assert str(REPO_ROOT) not in " ".join(command)

    gate = run_suite(*ARGS, "--perf-runs", "2", "--perf-set", "max-runs=2", "--perf-tolerance",
                     "0.05", "--perf-image", images["b"], baseline_file=recorded.baseline_file)
    row = gate.cases[CASE]
    assert row["verdict"] == "regression" and gate.outcome.ret == 1, row["message"]
    changes = row["environment_diff"].split(", ")
    assert changes[0].startswith(f"image {image_of(images['a'])}") and \
        f"-> {image_of(images['b'])}" in changes[0], changes
    assert [change for change in changes[1:] if not change.startswith("commit ")] == [
        f"{name} unset -> {value} (image b)" for name, value in sorted(B_VARIABLES.items())]
    [line] = [line for line in gate.output.splitlines() if line.startswith(f"{CASE}: ")]
    assert f"; environment: image {images['a']}" in line
    assert f"[baseline {recorded.baseline_file}, recorded in image {images['a']}]; " in line
    repro = line.split("; repro: ")[1]
    assert "env " not in repro and not any(name in repro for name in B_VARIABLES), repro


def test_ab_of_an_image_against_itself_runs_without_hosts_file_or_resolvable_name(
        run_suite, images):
    """`nohosts` has no /etc/hosts (torchrun's standalone rendezvous waited on "localhost"), and
    the session runs where the host's own name resolves nowhere (c10d used to hand it to the
    workers as their store's address): each made every run wait for its timeout, silent (issue
    60). The image gets the host's hosts file; the workers meet at 127.0.0.1, the only store
    address the suite's agent of one node gives them. Two pairs (what is at stake is whether
    a run ends, not the verdict on its speed): each run ends well, where each waited for its
    timeout before, and the verdict says two pairs are too few to call anything."""
    name = "rn50-perf-unresolvable"
    with pytest.raises(OSError):
        socket.getaddrinfo(name, None)
    renamed = ["unshare", "--uts", sys.executable, "-c", "import os, socket, sys; socket."
               f"sethostname({name!r}); os.execv(sys.argv[1], sys.argv[1:])"]
    run = run_suite(*ARGS, "--perf-runs", "2", "--perf-set", "max-runs=2", "--perf-launcher",
                    "local", "--perf-image", images["nohosts"], "--perf-candidate-image",
                    images["nohosts"], prefix=renamed)
    row = run.cases[CASE]
    assert row["verdict"] in ("pass", "inconclusive") and row["pairs"] == 2, row["message"]
    assert "2 pairs: a 95% interval takes 6" in row["message"]
    for number in range(1, 5):
        saved = json.loads((run.results_dir / CASE / f"run-{number}.json").read_text())
        assert saved["outcome"] == "ok", saved
    assert row["environment_diff"].startswith("no change in"), row["environment_diff"]
    assert row["reference"]["environment"]["host"] == name
    record = json.loads((run.results_dir / CASE / "run-1.json").read_text())
    assert "--ro-bind /etc/hosts /etc/hosts" in " ".join(record["commands"][0])
    assert "perf_tests.runs.agent" in record["commands"][0]


def test_podman_runs_the_same_image_as_bwrap_on_two_simulated_nodes(run_suite, images,
                                                                    podman_conf):
    """Each node's agent in a container of its own, its workers meeting rank 0's store on
    127.0.0.1, the host's network."""
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
                                  "image without the interpreter", "runtime that cannot start"])
def test_a_bad_image_or_runtime_is_one_line_before_anything_is_measured(
        run_suite, images, podman_conf, tmp_path, kind):
    if kind == "missing image":
        args, line = ("--perf-image", tmp_path / "nowhere"), (
            f"image {tmp_path / 'nowhere'} does not exist; pass a root filesystem folder")
    elif kind == "runtime not installed":
        args, line = ("--perf-image", tmp_path / "new.sif", "--perf-container-runtime",
                      "apptainer"), "--perf-container-runtime apptainer: apptainer is not on PATH"
        assert shutil.which("apptainer") is None
    elif kind == "image without torch":   # its /etc/environment has no PATH: Debian's applies
        args, line = ("--perf-image", images["plain"]), (
            f"this session's stack (image {images['plain']} (bwrap)): its python3 has no torch; "
            "python3 was looked up on Debian's default PATH /usr/local/sbin:/usr/local/bin:"
            "/usr/sbin:/usr/bin:/sbin:/bin (its /etc/environment sets none; a venv's bin is on "
            "the PATH only where a PATH line there names it); install torch there, name the "
            "interpreter that has it with --perf-image-python PATH, or pick another image")
    elif kind == "image without the interpreter":
        args, line = ("--perf-image", images["a"], "--perf-image-python", "python3.99"), (
            f"this session's stack (image {images['a']} (bwrap, python python3.99)): it has no "
            "python3.99; python3.99 was looked up on its /etc/environment's PATH /opt/venv/bin:"
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin; install Python and "
            "torch there, name its interpreter with --perf-image-python PATH, or pick another "
            "image")
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
    """What tools.bisect.command can split between two images (the variables they set, each
    layered as a setting over the reference's image) and, in one line, what it cannot."""
    done = run_tool("bisect", "-k", "1n1g_fp32", "--perf-image", images["a"],
                    "--perf-candidate-image", images["b"], "--list", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == (f"reference: image {images['a']} (bwrap); candidate: image "
                        f"{images['b']} (bwrap)")
    assert lines[1] == "3 changes: " + "; ".join(
        f"{name}: unset -> {value}" for name, value in sorted(B_VARIABLES.items()))
    assert lines[2] == (f"not layered: the images' own files ({images['a']} -> {images['b']}: "
                        "no Python distribution differs; no Debian package differs): one "
                        "image's files cannot be layered over another's; list the images "
                        "between them, one a line, in a --stacks file to find the first slower "
                        "one")
    # A stacks file of images, the known-good first.
    stacks = tmp_path / "images.txt"
    stacks.write_text(f"a: --perf-candidate-image {images['a']}\n"
                      f"b: --perf-candidate-image {images['b']}\n")
    done = run_tool("bisect", "-k", "1n1g_fp32", "--stacks", stacks, "--list",
                    cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"2 stacks; reference: a (image {images['a']} (bwrap))", f"b: image {images['b']} (bwrap)"]
