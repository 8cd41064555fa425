"""Each container runtime's command line, as its documentation has it, for every launcher; which
runtime an image takes; what identifies a root filesystem image. The images themselves run in
tests/test_container_sessions.py (bwrap and podman, for real)."""
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from perf_tests.containers import (RUNTIMES, ContainerError, Image, check_image, image_variables,
                                   make_image, path_origin, pyxis_options, root_contents,
                                   runtime_command)
from perf_tests.containers.runtime import root_environment, root_identity
from perf_tests.core.cases import Case
from perf_tests.runs.host import ProbeError, image_problem
from perf_tests.runs.launch import LauncherError, LaunchRequest, Stack
from perf_tests.runs.launchers import (LocalLauncher, MpirunLauncher, SimulatedLauncher,
                                       SlurmLauncher)

REPO, RESULTS, DATA = Path("/work/repo"), Path("/scratch/results"), Path("/scratch/data")
ENV = {"PATH": "/home/u/.venv/bin:/usr/bin", "VIRTUAL_ENV": "/home/u/.venv",
       "LD_LIBRARY_PATH": "/opt/host/lib", "PYTHONPATH": str(REPO), "RN50_FAULT": "x",
       "NCCL_ALGO": "Ring", "HOME": "/home/u"}


@pytest.fixture(autouse=True)
def suite_in_the_checkout(monkeypatch):
    """The suite's packages in REPO, as in a checkout the session runs from."""
    monkeypatch.setattr("perf_tests.runs.suite_code.code_root", lambda: REPO)


def command(runtime: str, name: str = "img", gpus: bool = False, label: str = "") -> list[str]:
    return runtime_command(Image(name, runtime), [REPO, RESULTS, DATA], REPO, ENV, gpus, label)


def pairs(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, part in enumerate(argv[:-1]) if part == flag]


@pytest.mark.parametrize("runtime, gpu_flags", [("docker", ["--gpus", "all"]),
                                                ("podman", ["--device", "nvidia.com/gpu=all"])])
def test_docker_and_podman_share_the_host_network_ipc_and_mounts(runtime, gpu_flags):
    argv = command(runtime, "nvcr.io/nvidia/pytorch:24.10-py3", gpus=True, label="/r/run-1")
    assert argv[:3] == [runtime, "run", "--rm"] and argv[-1] == "nvcr.io/nvidia/pytorch:24.10-py3"
    assert pairs(argv, "--network") == pairs(argv, "--ipc") == pairs(argv, "--pid") == ["host"]
    assert pairs(argv, "-v") == [f"{path}:{path}" for path in (REPO, RESULTS, DATA)]
    assert pairs(argv, "-w") == [str(REPO)]
    # By name only: the values come from the launch's environment, never the command line;
    # the host's own paths (PATH, HOME, VIRTUAL_ENV...) stay out.
    assert pairs(argv, "-e") == ["NCCL_ALGO", "PYTHONPATH", "RN50_FAULT"]
    # Its containers carry the run's label: those a killed client leaves are removed by it.
    assert pairs(argv, "--label") == ["rn50.run=/r/run-1"]
    assert " ".join(gpu_flags) in " ".join(argv)
    assert " ".join(gpu_flags) not in " ".join(command(runtime, "img", gpus=False))


def test_podman_runs_a_root_folder_in_an_overlay_with_its_environment_file(tmp_path):
    (tmp_path / "usr").mkdir()
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "environment").write_text(
        'PATH="/opt/venv/bin:/usr/bin"\nNCCL_ALGO=Tree\nONEDNN_PRIMITIVE_CACHE_CAPACITY=0\n')
    argv = command("podman", str(tmp_path))
    # The image's defaults as bwrap reads them (quotes removed), but where the host sets one.
    assert argv[-6:] == ["-e", "ONEDNN_PRIMITIVE_CACHE_CAPACITY=0", "-e",
                         "PATH=/opt/venv/bin:/usr/bin", "--rootfs", f"{tmp_path}:O"]
    assert "NCCL_ALGO=Tree" not in argv


def test_apptainer_binds_the_folders_and_passes_gpus_with_nv():
    argv = command("apptainer", "/images/new.sif", gpus=True)
    assert argv[:3] == ["apptainer", "exec", "--nv"]
    assert pairs(argv, "--bind") == [str(REPO), str(RESULTS), str(DATA)]
    assert argv[-3:] == ["--pwd", str(REPO), "/images/new.sif"]
    assert "--nv" not in command("apptainer", "/images/new.sif")


def test_enroot_mounts_passes_variables_by_name_and_changes_directory_itself():
    argv = command("enroot", "/images/new.sqsh", gpus=True)
    assert argv[:2] == ["enroot", "start"]
    assert pairs(argv, "--mount") == [f"{path}:{path}" for path in (REPO, RESULTS, DATA)]
    assert pairs(argv, "--env")[:3] == ["NCCL_ALGO", "PYTHONPATH", "RN50_FAULT"]
    assert "NVIDIA_VISIBLE_DEVICES=all" in pairs(argv, "--env")
    assert argv[-5:] == ["/images/new.sqsh", "sh", "-c", 'cd "$0" && exec "$@"', str(REPO)]
    assert "NVIDIA_VISIBLE_DEVICES=all" not in command("enroot", "/images/new.sqsh")


def test_pyxis_runs_the_image_with_the_folders_mounted_and_the_checkout_as_workdir():
    assert pyxis_options(Image("nvcr.io#nvidia/pytorch:24.10-py3", "enroot"),
                         [REPO, RESULTS, REPO], REPO) == [
        "--container-image=nvcr.io#nvidia/pytorch:24.10-py3",
        f"--container-mounts={REPO}:{REPO},{RESULTS}:{RESULTS}",
        f"--container-workdir={REPO}"]


def image_root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    for folder in ("usr/bin", "etc", "root", "tmp", "opt/venv/lib/python3.11/site-packages"):
        (root / folder).mkdir(parents=True)
    (root / "bin").symlink_to("usr/bin")
    (root / "root" / ".profile").write_text("")
    (root / "etc" / "hosts").write_text("127.0.0.1 localhost\n")
    (root / "etc" / "environment").write_text(
        'PATH="/opt/venv/bin:/usr/bin"\nNCCL_ALGO=Tree\nONEDNN_PRIMITIVE_CACHE_CAPACITY=0\n')
    return root


def test_bwrap_binds_the_image_read_only_and_the_session_folders_at_their_paths(tmp_path):
    root = image_root(tmp_path)
    cache = Path("/root/.cache/rn50_perf/data")   # inside the image's /root, which lacks it
    argv = runtime_command(Image(str(root), "bwrap"), [REPO, cache], REPO, ENV, False)
    text = " ".join(argv)
    assert f"--ro-bind {root}/usr /usr" in text and "--symlink usr/bin /bin" in text
    # /root is bound entry by entry, so that the cache's folder can be made inside.
    assert f"--ro-bind {root}/root /root" not in text
    assert f"--dir /root --ro-bind {root}/root/.profile /root/.profile" in text
    assert f"--bind {REPO} {REPO}" in text and f"--bind {cache} {cache}" in text
    assert pairs(argv, "--chdir") == [str(REPO)]
    assert f"--ro-bind {root}/tmp" not in text and "--tmpfs /tmp" in text
    assert "--ro-bind /etc/hosts /etc/hosts" in text
    # The image's PATH and its defaults; a variable the host sets wins over the image's.
    assert {"PATH", "VIRTUAL_ENV", "LD_LIBRARY_PATH"} <= set(pairs(argv, "--unsetenv"))
    settings = {argv[i + 1]: argv[i + 2] for i, part in enumerate(argv) if part == "--setenv"}
    assert settings == {"PATH": "/opt/venv/bin:/usr/bin", "ONEDNN_PRIMITIVE_CACHE_CAPACITY": "0"}
    # the host's process ids: the host probe finds the run's processes in the host's /proc
    assert "/dev/nvidia" not in text and "--unshare-pid" not in text


def test_bwrap_gives_an_image_without_a_hosts_file_the_host_s(tmp_path):
    """debootstrap's minbase writes no /etc/hosts: the host's is made on the tmpfs root, its
    /etc bound entry by entry around it."""
    root = image_root(tmp_path)
    (root / "etc" / "hosts").unlink()
    (root / "etc" / "os-release").write_text("PRETTY_NAME=test\n")
    text = " ".join(runtime_command(Image(str(root), "bwrap"), [REPO], REPO, ENV, False))
    assert f"--ro-bind {root}/etc /etc" not in text
    assert f"--dir /etc --ro-bind {root}/etc/environment /etc/environment" in text
    assert "--ro-bind /etc/hosts /etc/hosts" in text


def test_bwrap_gpus_take_the_driver_libraries_on_the_library_path(tmp_path):
    argv = runtime_command(Image(str(image_root(tmp_path)), "bwrap"), [REPO], REPO, ENV, True)
    settings = {argv[i + 1]: argv[i + 2] for i, part in enumerate(argv) if part == "--setenv"}
    assert settings["LD_LIBRARY_PATH"] == "/host-nvidia"


def test_a_root_folder_s_identity_follows_every_file_in_it(tmp_path, monkeypatch):
    """Any file added, changed or removed changes it, inside a package's RECORD or not (a
    module dropped into site-packages slowed training 64% under an unchanged identity); a copy
    of the same files has the same one; what containers mount their own of (/tmp) and what a
    running system writes (/var/log) are left out."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    root = image_root(tmp_path)
    site = root / "opt/venv/lib/python3.11/site-packages"
    first = root_identity(root)
    assert re.fullmatch(r"content sha256:[0-9a-f]{12}", first) and root_identity(root) == first
    seen = {first}
    (site / "sitecustomize.py").write_text("import os\n")     # no RECORD names it
    seen.add(root_identity(root))
    (site / "sitecustomize.py").write_text("import sys\n")    # the same size, other bytes
    os.utime(site / "sitecustomize.py", ns=(1, 1))
    seen.add(root_identity(root))
    (site / "sitecustomize.py").chmod(0o700)
    seen.add(root_identity(root))
    (root / "etc" / "environment").write_text("PATH=/usr/bin\n")
    seen.add(root_identity(root))
    assert len(seen) == 5
    assert root_environment(root) == {"PATH": "/usr/bin"}
    (root / "tmp" / "scratch").write_text("x")
    (root / "var" / "log").mkdir(parents=True)
    (root / "var" / "log" / "dpkg.log").write_text("x")
    assert root_identity(root) == root_identity(root) in seen
    copy = tmp_path / "copy"
    shutil.copytree(root, copy, symlinks=True)
    assert root_identity(copy) == root_identity(root)


def test_a_root_folder_s_identity_reads_only_the_files_that_changed(tmp_path, monkeypatch):
    """The cache: an unchanged folder costs its listing; a changed one, its changed files."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    root = image_root(tmp_path)
    (root / "usr" / "bin" / "python3").write_bytes(b"\x7fELF" * 1000)
    read = []
    monkeypatch.setattr(root_contents, "file_digest",
                        lambda path, real=root_contents.file_digest: read.append(path) or
                        real(path))
    first = root_identity(root)
    assert sorted(read) == sorted(path for path in root.rglob("*") if path.is_file()
                                  and not path.is_symlink())
    read.clear()
    assert root_identity(root) == first and read == []
    (root / "etc" / "environment").write_text("PATH=/usr/bin\n")
    assert root_identity(root) != first and read == [root / "etc" / "environment"]


def test_an_image_s_variables_and_where_its_path_comes_from(tmp_path):
    root = image_root(tmp_path)
    assert image_variables(Image(str(root), "bwrap")) == image_variables(
        Image(str(root), "podman")) == {"PATH": "/opt/venv/bin:/usr/bin", "NCCL_ALGO": "Tree",
                                        "ONEDNN_PRIMITIVE_CACHE_CAPACITY": "0"}
    assert path_origin(Image(str(root), "bwrap")) == \
        "its /etc/environment's PATH /opt/venv/bin:/usr/bin"
    (root / "etc" / "environment").write_text("NCCL_ALGO=Tree\n")
    assert path_origin(Image(str(root), "podman")).startswith(
        "Debian's default PATH /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "
        "(its /etc/environment sets none; a venv's bin is on the PATH only where a PATH line "
        "there names it)")


def test_an_image_takes_the_runtime_asked_for_else_the_first_that_runs_its_kind(
        tmp_path, monkeypatch):
    root = image_root(tmp_path)
    installed = {"bwrap", "docker"}
    for runtime in RUNTIMES.values():
        monkeypatch.setattr(runtime, "installed",
                            lambda runtime=runtime: runtime.name in installed)
    assert make_image(str(root), None).runtime == "bwrap"
    assert make_image("nvcr.io/nvidia/pytorch:24.10-py3", None).runtime == "docker"
    assert make_image(str(root), "podman", "/opt/venv/bin/python3") == Image(
        str(root), "podman", "/opt/venv/bin/python3")
    with pytest.raises(ContainerError, match=r"^image new.sif: no container runtime that runs "
                       r"it is installed \(tried apptainer\)"):
        make_image("new.sif", None)
    with pytest.raises(ContainerError, match="does not exist"):
        make_image(str(tmp_path / "nowhere"), None)


def test_a_missing_runtime_or_image_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))   # nothing installed
    with pytest.raises(ContainerError, match=r"^--perf-container-runtime apptainer: apptainer "
                       r"is not on PATH; install apptainer"):
        check_image(Image("new.sif", "apptainer"))
    monkeypatch.undo()
    if RUNTIMES["bwrap"].installed():
        with pytest.raises(ContainerError, match=rf"^image {tmp_path} \(bwrap\): {tmp_path} is "
                           "not a root filesystem folder"):
            check_image(Image(str(tmp_path), "bwrap"))


def request(case: Case, stack: Stack, tmp_path: Path) -> LaunchRequest:
    (tmp_path / "r").mkdir(exist_ok=True)
    return LaunchRequest(case=case, worker_args=["--config", "c.json"], run_dir=tmp_path / "r",
                         env=dict(ENV), cwd=REPO, timeout=60, stack=stack,
                         mounts=(RESULTS, DATA))


# Each runtime's image and its interpreter, as the command line ends with them.
IMAGES = {"docker": ("nvcr.io/nvidia/pytorch:24.10-py3", ["nvcr.io/nvidia/pytorch:24.10-py3"]),
          "podman": ("nvcr.io/nvidia/pytorch:24.10-py3", ["nvcr.io/nvidia/pytorch:24.10-py3"]),
          "apptainer": ("/images/new.sif", ["--pwd", str(REPO), "/images/new.sif"]),
          "enroot": ("/images/new.sqsh", ["/images/new.sqsh", "sh", "-c", 'cd "$0" && exec "$@"',
                                          str(REPO)]),
          "bwrap": ("/images/root", ["--setenv", "PATH",
                                     "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"])}


@pytest.mark.parametrize("runtime", sorted(IMAGES))
def test_an_image_wraps_the_agent_of_every_launcher_on_each_node(tmp_path, runtime, monkeypatch):
    """Local and simulated agents, mpirun's one per node and srun's (without pyxis) start the
    runtime, which starts the image's interpreter; the host's interpreter appears nowhere."""
    name, ending = IMAGES[runtime]
    monkeypatch.setattr("perf_tests.containers.bwrap.bind_image", lambda root, inside, needed: [
        "--ro-bind", f"{root}/usr", "/usr"])
    stack = Stack(image=Image(name, runtime, "/usr/bin/python"))
    hostfile = tmp_path / "hosts"
    hostfile.write_text("node1\nnode2\n")
    mpirun = MpirunLauncher(str(hostfile))
    mpirun.rendezvous = lambda request, nodes: ("10.0.0.1", 29500)
    for launcher, case in [(LocalLauncher(), Case.parse("1n2g_fp32_b8")),
                           (SimulatedLauncher(), Case.parse("2n1g_fp32_b8")),
                           (mpirun, Case.parse("2n1g_fp32_b8")),
                           (slurm(tmp_path, pyxis=False), Case.parse("2n1g_fp32_b8"))]:
        made = request(case, stack, tmp_path)
        for _, argv in launcher.commands(made):
            argv = launcher.wrap(made, argv, made.env)
            at = argv.index(runtime)
            assert argv.count(runtime) == 1, (launcher.name, argv)
            python = argv.index("/usr/bin/python")
            assert argv[python - len(ending):python] == ending, (launcher.name, argv)
            assert argv[python + 1] == "-m" and sys.executable not in argv
            assert argv[-2:] == ["--config", "c.json"]
            # The launcher's own command (mpirun, srun) runs the runtime on each node.
            assert argv[0] == runtime or at > argv.index("--hostfile" if launcher is mpirun
                                                         else "--job-name")
            if runtime in ("docker", "podman"):
                assert pairs(argv, "-v") == [f"{path}:{path}" for path in (REPO, RESULTS, DATA)]
            # The workers meet at the loopback address, never at the host's name, which an
            # image without the host's /etc/hosts does not resolve (issue 60): the simulated
            # nodes' agents are told so, the suite's agent of one node uses no other.
            if launcher.name == "simulated":
                assert pairs(argv, "--master-addr") == ["127.0.0.1"], argv
            if launcher.name in ("local", "simulated"):
                assert argv[python + 1:python + 3] == ["-m", "perf_tests.runs.agent"], argv


def slurm(tmp_path: Path, pyxis: bool) -> SlurmLauncher:
    launcher = SlurmLauncher({"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "n[1-2]"})
    launcher._nodes, launcher._pyxis = ["n1", "n2"], pyxis
    launcher.node_addresses = lambda names: names
    launcher.rendezvous = lambda request, nodes: ("n1", 29500)
    return launcher


def test_slurm_runs_an_enroot_image_through_pyxis_where_srun_has_it(tmp_path):
    case = Case.parse("2n1g_fp32_b8")
    squashfs = tmp_path / "new.sqsh"
    squashfs.write_bytes(b"hsqs")
    stack = Stack(image=Image(str(squashfs), "enroot"))
    launcher = slurm(tmp_path, pyxis=True)
    made = request(case, stack, tmp_path)
    [(_, argv)] = launcher.commands(made)
    argv = launcher.wrap(made, argv, made.env)
    assert argv[0] == "srun" and f"--container-image={squashfs}" in argv
    assert f"--container-workdir={REPO}" in argv and "enroot" not in argv
    assert argv[argv.index("--container-workdir=/work/repo") + 1:][:3] == [
        "python3", "-m", "perf_tests.runs.network"]
    # Without pyxis, and for any other runtime, the runtime's command on each node.
    for launcher, other in [(slurm(tmp_path, pyxis=False), stack),
                            (slurm(tmp_path, pyxis=True),
                             Stack(image=Image("/images/new.sif", "apptainer")))]:
        made = request(case, other, tmp_path)
        [(_, argv)] = launcher.commands(made)
        argv = launcher.wrap(made, argv, made.env)
        assert not any(part.startswith("--container-image") for part in argv)
        assert other.image.runtime in argv and argv.index(other.image.runtime) > argv.index(
            "--job-name")


def test_the_variables_a_launch_adds_reach_an_image_and_its_containers_are_removed(
        tmp_path, monkeypatch):
    """The workers-per-host count and the process tree's token are set as the launch starts
    its commands, after the request was made: a runtime that passes variables by name passes
    them too. After the launch, the run's containers that outlived their client are removed."""
    started, removed = [], []

    class Tree:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def start(self, name, argv, env, cwd, run_dir):
            started.append((argv, env))
            raise OSError("not started")

    monkeypatch.setattr("perf_tests.runs.launch.ProcessTree", Tree)
    monkeypatch.setattr("perf_tests.runs.launch.remove_containers",
                        lambda image, label: removed.append((image.runtime, label)))
    stack = Stack(image=Image("nvcr.io/nvidia/pytorch:24.10-py3", "podman"))
    made = request(Case.parse("2n1g_fp32_b8"), stack, tmp_path)
    with pytest.raises(LauncherError):
        SimulatedLauncher().launch(made)
    argv, env = started[0]
    assert {"RN50_WORKERS_PER_HOST", "RN50_PERF_TOKEN"} <= set(pairs(argv, "-e"))
    assert env["RN50_WORKERS_PER_HOST"] == "2"
    assert removed == [("podman", str((tmp_path / "r").resolve()))]


@pytest.mark.parametrize("runtime", ["bwrap", "docker"])
def test_an_installed_suite_s_packages_go_into_the_image_not_the_host_s_site_packages(
        tmp_path, monkeypatch, runtime):
    """Installed with pip, the suite is in the host's site-packages, which holds the host's
    torch too: the image gets a folder of links to the three packages first on PYTHONPATH,
    and those mounted, not site-packages (issue 60)."""
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    for name in ("perf_tests", "rn50_model", "tools", "torch"):
        (site / name).mkdir(parents=True)
    monkeypatch.setattr("perf_tests.runs.suite_code.code_root", lambda: site)
    image = str(image_root(tmp_path)) if runtime == "bwrap" else "img"
    made = request(Case.parse("1n1g_fp32_b8"), Stack(image=Image(image, runtime)), tmp_path)
    [(_, argv)] = LocalLauncher().commands(made)
    argv = LocalLauncher().wrap(made, argv, made.env)
    links = Path(pairs(argv, "--bind" if runtime == "bwrap" else "-v")[-4].split(":")[0])
    assert links.name.startswith("rn50-perf-suite-")
    assert sorted(path.name for path in links.iterdir()) == ["perf_tests", "rn50_model", "tools"]
    assert (links / "rn50_model").resolve() == site / "rn50_model"
    mounted = pairs(argv, "--bind")[1:] if runtime == "bwrap" else [   # after /dev/shm
        volume.split(":")[0] for volume in pairs(argv, "-v")]
    assert mounted == [str(REPO), str(RESULTS), str(DATA), str(links),
                       *(str(site / name) for name in ("perf_tests", "rn50_model", "tools"))]
    python = argv.index("python3")
    assert argv[python - 2:python] == ["env", f"PYTHONPATH={links}:{REPO}"]


# What each runtime printed here for an interpreter the image lacks (docker 20.10, podman 4.3,
# bwrap 0.8), and a module it lacks.
NO_INTERPRETER = {
    "bwrap": "bwrap: execvp python3.99: No such file or directory",
    "docker": 'docker: Error response from daemon: failed to create shim task: OCI runtime '
              'create failed: runc create failed: unable to start container process: exec: '
              '"python3.99": executable file not found in $PATH: unknown',
    "podman": 'Error: runc: runc create failed: unable to start container process: exec: '
              '"python3.99": executable file not found in $PATH: OCI runtime attempted to invoke '
              'a command that was not found'}


@pytest.mark.parametrize("runtime", sorted(NO_INTERPRETER))
def test_an_image_without_the_interpreter_or_torch_says_how_to_name_one(tmp_path, runtime,
                                                                        monkeypatch):
    """One line naming --perf-image-python and where the PATH it was looked up on comes from
    (issues 56 and 60), not the runtime's own `execvp python3: No such file or directory`."""
    root = image_root(tmp_path)
    name = "img" if runtime == "docker" else str(root)
    monkeypatch.setattr(type(RUNTIMES[runtime]), "image_variables",
                        lambda self, image: {"PATH": "/opt/venv/bin:/usr/bin"}
                        if runtime == "docker" else root_environment(root))
    image = Image(name, runtime, "python3.99")
    origin = ("its ENV PATH" if runtime == "docker" else "its /etc/environment's PATH") + \
        " /opt/venv/bin:/usr/bin"
    with pytest.raises(ProbeError) as raised:
        image_problem("this session's stack", image, NO_INTERPRETER[runtime])
    assert str(raised.value) == (
        f"this session's stack: it has no python3.99; python3.99 was looked up on {origin}; "
        "install Python and torch there, name its interpreter with --perf-image-python PATH, "
        "or pick another image")
    with pytest.raises(ProbeError) as raised:
        image_problem("this session's stack", image, "ModuleNotFoundError: No module named "
                                                     "'torch'")
    assert str(raised.value).startswith("this session's stack: its python3.99 has no torch; "
                                        f"python3.99 was looked up on {origin}; install torch "
                                        "there, name the interpreter that has it with "
                                        "--perf-image-python PATH")
    image_problem("this session's stack", image, "RuntimeError: something else")   # not these
