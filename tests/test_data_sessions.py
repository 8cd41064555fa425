"""Real `pytest perf_tests` sessions reading JPEGs through DALI: the generated set grows with the
job, and a user's data dir too small for the job is refused before any worker starts."""
import pytest

from conftest import TINY_CASE_ARGS

pytestmark = pytest.mark.slow

ONE_SHORT_RUN = ["--perf-runs", "1", "--perf-set", "max-runs=1", "--perf-set", "warmup=1",
                 "--perf-set", "iters=1"]


def test_a_batch_larger_than_the_base_sets_shard_still_measures(run_suite):
    # Two ranks at batch 300 need 600 images an epoch; the base set has 512 (256 a shard),
    # which once ended in DALI's "It seems that there is no data in the pipeline". The first
    # batch already reads past its rank's shard: one step, timed, no warm-up (16.2-18.7 s ->
    # 13.1-15.1 s alone here, most of the rest generating the larger set).
    run = run_suite("--perf-case", "1n2g_fp32_b300", "-k", "1n2g_fp32_b300",
                    "--perf-data-backend", "dali-cpu", *TINY_CASE_ARGS, *ONE_SHORT_RUN,
                    "--perf-set", "warmup=0")
    assert run.outcome.ret == 0, run.output
    row = run.cases["1n2g_fp32_b300"]
    assert row["verdict"] == "no-baseline" and row["median_ips"] > 0, row


def test_a_data_dir_too_small_for_the_job_is_one_line_before_any_worker(run_suite, jpeg_folder):
    run = run_suite("--perf-case", "1n2g_fp32_b20", "-k", "1n2g_fp32_b20",
                    "--perf-data-backend", "dali-cpu", "--perf-data-dir", str(jpeg_folder),
                    *TINY_CASE_ARGS, *ONE_SHORT_RUN)
    assert run.outcome.ret == 1, run.output
    message = run.cases["1n2g_fp32_b20"]["message"]
    assert message == (f"1n2g_fp32_b20: data dir {jpeg_folder} holds 32 images, fewer than 40 "
                       "(2 ranks x batch 20): every rank needs at least one whole batch; use a "
                       "smaller batch or a larger data set")
    assert not list(run.results_dir.glob("1n2g_fp32_b20/run-*")), "a worker was started"
