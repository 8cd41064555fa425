"""--perf-set share-devices=on: ranks beyond a host's devices share them (rank r on device r mod
count), for a user who wants the path and not the figure. Its parsing and bad values, the skip
decision on a host of one CUDA device (a stand-in count: no GPU here), each rank's device, the
verdict and the rows' mark; and one real session on this CPU, where four worker processes share two
cores: marked in its row, its table and its line, judged `shared-devices` against an entry that
exists, and not recorded under --perf-update-baselines."""
import pytest

from conftest import TINY_CASE_ARGS, baseline_document
from perf_tests.cli.settings import SettingsError, check, settings_from_args
from perf_tests.core.cases import PROFILES, Case
from perf_tests.judging.verdicts import SHARED_DEVICES
from perf_tests.modes.outcomes import fails
from perf_tests.report.tables import verdict_text
from perf_tests.results.case_result import CaseResult
from perf_tests.runs.launch import Host
from perf_tests.runs.launchers import LocalLauncher, SimulatedLauncher
from rn50_model.config import ConfigError, TrainConfig
from rn50_model.startup import device_index

ONE_GPU = Host("cuda", 1, 16)


def test_the_option_parses_and_reaches_every_workers_config():
    settings, rest = settings_from_args(["--perf-set", "share-devices=on", "--perf-set",
                                         "dist-backend=gloo", "-k", "1n2g"])
    assert rest == ["-k", "1n2g"]
    assert settings.share_devices is True and settings.dist_backend == "gloo"
    train = settings.resolved(PROFILES["full"]).train_values()
    assert train["share_devices"] is True and train["dist_backend"] == "gloo"
    TrainConfig(**train).validate("cuda")
    default, _ = settings_from_args([])
    assert default.share_devices is False and default.dist_backend == "auto"


@pytest.mark.parametrize("args, line", [
    (["--perf-set", "share-devices=maybe"], "argument --perf-set: share-devices=maybe: 'maybe' "
                                            "is neither on nor off (on/off, true/false, yes/no, "
                                            "1/0)"),
    (["--perf-set", "dist-backend=mpi"], "argument --perf-set: dist-backend=mpi: 'mpi' is not "
                                         "one of auto, nccl, gloo"),
    (["--perf-set", "share-devices=on", "--perf-find-max-batch"],
     "--perf-set share-devices=on checks the throughput path of ranks sharing devices, not "
     "--perf-find-max-batch's figures; leave one of them out"),
    (["--perf-set", "share-devices=on", "--perf-candidate-env", "NCCL_ALGO=Ring"],
     "--perf-set share-devices=on checks the throughput path of ranks sharing devices, not "
     "--perf-candidate-*'s figures; leave one of them out"),
])
def test_bad_input_is_one_line(args, line):
    with pytest.raises(SettingsError) as raised:
        check(settings_from_args(args)[0])
    assert str(raised.value) == line


def test_nccl_on_cpu_is_refused_in_one_line():
    with pytest.raises(ConfigError, match="^dist_backend 'nccl' needs CUDA devices; on CPU use "
                                          "gloo$"):
        TrainConfig(precision="fp32", dist_backend="nccl").validate("cpu")


def test_a_case_asking_for_more_ranks_than_devices_skips_unless_they_share():
    two_ranks = Case(1, 2, "amp", 256)
    assert LocalLauncher().skip_reason(two_ranks, ONE_GPU) == \
        "needs 2 CUDA devices on this host, found 1"
    shared = Host("cuda", 1, 16, share_devices=True)
    assert LocalLauncher().skip_reason(two_ranks, shared) is None
    assert SimulatedLauncher().skip_reason(Case(2, 4, "amp", 256), shared) is None
    assert shared.sharing(2) == "2 ranks on 1 CUDA device"
    assert Host("cuda", 3, 16, share_devices=True).sharing(8) == "8 ranks on 3 CUDA devices"
    assert Host("cpu", 0, 2, share_devices=True).sharing(4) == \
        "4 worker processes on 2 CPU cores"
    # Where each rank has its own device, nothing is shared and nothing is marked.
    assert Host("cuda", 2, 16, share_devices=True).sharing(2) is None
    assert ONE_GPU.sharing(2) is None
    # A host without the devices at all still skips: nothing to share.
    assert Host("cuda", 0, 16, share_devices=True).lacks(1) == \
        "needs 1 CUDA devices on this host, found 0"


@pytest.mark.parametrize("local_rank, devices, share, device", [
    (0, 1, True, 0), (1, 1, True, 0), (7, 1, True, 0), (3, 2, True, 1), (5, 4, True, 1),
    (1, 2, False, 1), (1, 8, True, 1),
])
def test_rank_r_trains_on_device_r_mod_count(local_rank, devices, share, device):
    assert device_index(local_rank, devices, share) == device


def test_a_rank_beyond_the_devices_without_sharing_says_what_to_do():
    with pytest.raises(ConfigError, match=r"local rank 1 has no CUDA device of its own \(1 "
                                          r"here\).*--perf-set share-devices=on"):
        device_index(1, 1)


def shared_result(**details) -> CaseResult:
    return CaseResult.judged(Case(1, 2, "amp", 256), "throughput", SHARED_DEVICES,
                             "1n2g_amp_b256: 3000.0 img/s with 2 ranks on 1 CUDA device",
                             image_size=224, data_backend="synthetic", runs_ips=[3000.0],
                             **{"shared_devices": "2 ranks on 1 CUDA device", **details})


def test_a_shared_case_never_passes_a_gate():
    gate, _ = settings_from_args(["--perf-require-baseline", "--perf-set",
                                  "share-devices=on"])
    assert fails(gate, shared_result()) == " (--perf-require-baseline)"
    plain, _ = settings_from_args(["--perf-set", "share-devices=on"])
    assert fails(plain, shared_result()) is None   # a warning, as no-baseline


def test_the_table_marks_the_verdict_and_promotion_refuses_it():
    from tools.promote_baseline import unmeasured_reason
    row = shared_result().row_dict()
    assert row["shared_devices"] == "2 ranks on 1 CUDA device"
    assert verdict_text(row) == "shared-devices (2 ranks on 1 CUDA device)"
    error = {**row, "verdict": "error"}   # a failed path is marked too
    assert verdict_text(error) == "error (2 ranks on 1 CUDA device)"
    assert unmeasured_reason("1n2g_amp_b256", row) == (
        "its ranks shared devices (2 ranks on 1 CUDA device, --perf-set share-devices=on): a "
        "path check, never a baseline")


@pytest.mark.slow
def test_four_workers_on_two_cores_are_marked_and_never_recorded(run_suite):
    """The CPU's form of two ranks on one card: 1n4g on this 2-core host, against an entry of
    its own that the runs would pass, under --perf-update-baselines."""
    entries = {"1n4g_fp32_b2": {"median_ips": 5.0, "tolerance": 0.99}}
    run = run_suite("--perf-case", "1n4g_fp32_b2", "--perf-launcher", "local", "-k", "1n4g",
                    "--perf-set", "share-devices=on", "--perf-update-baselines", "--perf-runs", "1",
                    "--perf-set", "max-runs=1", "--perf-explain", "never", *TINY_CASE_ARGS,
                    baseline=baseline_document(entries), plots=True)
    assert run.outcome.ret == 0, run.output
    row = run.cases["1n4g_fp32_b2"]
    assert row["verdict"] == "shared-devices", row["message"]
    assert row["shared_devices"] == "4 worker processes on 2 CPU cores"
    assert "baseline_ips" not in row and "baseline_update" not in row
    assert row["message"].endswith(
        "(--perf-set share-devices=on): the path ran; not a real 1n4g figure, not judged "
        "against a baseline; not recorded as a baseline (--perf-update-baselines): its ranks "
        "shared devices")
    run.outcome.stdout.fnmatch_lines([
        "*PerfWarning: 1n4g_fp32_b2: * img/s with 4 worker processes on 2 CPU cores*",
        "1n4g_fp32_b2 * shared-devices (4 worker processes on 2 CPU cores)"])
    assert run.baseline()["entries"] == entries
    # Nor is it a point of a real 1n4g in the plots.
    run.outcome.stdout.fnmatch_lines(["no scaling plot: no case was measured*"])
