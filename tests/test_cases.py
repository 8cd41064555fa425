"""Case ids, profiles and how the command line resolves against a profile."""
import pytest

from perf_tests.cli.settings import Settings
from perf_tests.core.cases import FULL, SMOKE, Case, CaseIdError
from perf_tests.runs.host import HostFacts


@pytest.mark.parametrize("case_id, case", [
    ("1n8g_amp_b256", Case(1, 8, "amp", 256)),
    ("4n8g_fp32_b128", Case(4, 8, "fp32", 128)),
    ("12n16g_bf16_b1024", Case(12, 16, "bf16", 1024)),
])
def test_case_ids_round_trip(case_id, case):
    assert Case.parse(case_id) == case and case.case_id == case_id


@pytest.mark.parametrize("case_id, words", [
    ("1n8g-amp-b256", "does not parse; the form is {nodes}n{gpus_per_node}g_{precision}_b"),
    ("1n8g_fp16_b256", "has precision 'fp16'; use one of fp32, tf32, amp, bf16"),
    ("0n8g_amp_b256", "has a zero count"),
    ("1n8g_amp", "does not parse"),
])
def test_bad_case_ids_say_the_form(case_id, words):
    with pytest.raises(CaseIdError, match=words.replace("{", r"\{").replace("}", r"\}")):
        Case.parse(case_id)


def test_single_device_reference_keeps_precision_and_batch():
    assert Case(2, 8, "amp", 256).single_device == Case(1, 1, "amp", 256)


def test_full_matrix_is_dlperfs_and_1n1g_comes_first():
    ids = [case.case_id for case in FULL.cases()]
    assert len(ids) == 12 and ids[:2] == ["1n1g_amp_b256", "1n1g_fp32_b128"]
    assert ids[-2:] == ["4n8g_amp_b256", "4n8g_fp32_b128"]


def test_sweeps_replace_the_profiles_pairs():
    cases = FULL.cases(precisions=("bf16",), batches=(32, 64, 128, 160, 256))
    assert {c.batch_per_device for c in cases} == {32, 64, 128, 160, 256}
    assert len(cases) == 6 * 5 and {c.precision for c in cases} == {"bf16"}
    assert {c.case_id for c in FULL.cases(precisions=("tf32",))} >= {"1n1g_tf32_b256"}
    assert [c.case_id for c in SMOKE.cases()] == ["1n1g_bf16_b4", "1n1g_fp32_b8",
                                                 "1n2g_fp32_b8", "2n1g_fp32_b8"]


def requested(**values) -> Settings:
    """The command line with `values` given and every other option at its default."""
    return Settings(**values)


def test_unset_options_take_the_profiles_protocol():
    full = requested().resolved(FULL)
    assert (full.runs, full.max_runs, full.warmup_iters, full.timed_iters, full.image_size,
            full.launcher) == (5, 15, 20, 100, 224, "local")
    smoke = requested().resolved(SMOKE)
    assert (smoke.runs, smoke.warmup_iters, smoke.timed_iters, smoke.image_size,
            smoke.launcher) == (3, 2, 4, 64, "simulated")


def test_given_options_win_over_the_profile():
    chosen = requested(runs=7, warmup_iters=0, timed_iters=9, image_size=128,
                       launcher="mpirun").resolved(FULL)
    assert (chosen.runs, chosen.max_runs, chosen.warmup_iters, chosen.timed_iters,
            chosen.image_size, chosen.launcher) == (7, 21, 0, 9, 128, "mpirun")


def test_a_baseline_is_recorded_from_more_runs_than_a_gate_takes():
    """... and as many again may run, to replace the runs a busy host marked."""
    for profile in (FULL, SMOKE):
        recording = requested(update_baselines=True).resolved(profile)
        assert (recording.runs, recording.max_runs) == (10, 20)
    chosen = requested(update_baselines=True, runs=4).resolved(SMOKE)
    assert (chosen.runs, chosen.max_runs) == (4, 8)
    assert requested(update_baselines=True, runs=4, max_runs=4).resolved(SMOKE).max_runs == 4


V100 = {"device_count": 8, "cpu_count": 80, "device": "Tesla V100-SXM2-16GB",
        "compute_capability": "7.0", "dali": "1.30.0", "torchvision": "0.16.0"}


@pytest.mark.parametrize("precision", ["tf32", "bf16"])
def test_tf32_and_bf16_skip_on_a_gpu_before_ampere(precision):
    """A host whose probe found these devices (a GPU host cannot be had here)."""
    def skip_reason(environment: dict, case: Case) -> str | None:
        return HostFacts(environment).skip_reason(case, "full", "synthetic", compile=False)

    reason = skip_reason(V100, Case(1, 1, precision, 128))
    assert reason == (f"precision {precision} needs compute capability 8.0 (Ampere) or newer; "
                      "this host's Tesla V100-SXM2-16GB has 7.0")
    assert skip_reason(V100, Case(1, 1, "amp", 256)) is None
    h100 = {**V100, "device": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0"}
    assert skip_reason(h100, Case(1, 1, precision, 128)) is None
