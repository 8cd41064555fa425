"""Time-to-train cases: the LR schedule, the verdict rule, and real `pytest perf_tests
--perf-case ..._ttt` sessions on a tiny learnable JPEG set through DALI CPU, their results,
reports and MLPerf logs."""
import contextlib
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import baseline_document
from perf_tests.baselines.file import load_baseline_file
from perf_tests.core.cases import Case
from perf_tests.judging.detectable import PRECISION, min_detectable_slowdown
from perf_tests.judging.verdicts import (IMPROVEMENT, INCONCLUSIVE, NOT_CONVERGED, PASS,
                                         REGRESSION)
from perf_tests.modes.time_to_train.verdict import (RunFigures, judge_time_to_train,
                                                    measure_verdicts)
from perf_tests.results.measures import measures_of
from perf_tests.report.time_to_train import markdown_section, terminal_table
from rn50_model.config import MLPERF_TARGET_TOP1, ConfigError, ConvergenceConfig, TrainConfig
from rn50_model.convergence import learning_rate, train_to_target
from rn50_model.data import Shard
from rn50_model.dataset import LearnableDatasetSpec, ensure_learnable_dataset
from rn50_model.mlperf_log import MLPERF_LOG, MLPERF_RULESET
from rn50_model.startup import Placement
from rn50_model.validation import evaluate, validation_loader

CASE = "1n1g_fp32_b8_ttt"


def figures(*runs, top1=0.9, reached=True):
    return [RunFigures(index, reached, seconds if reached else None, top1, 1.0, 3, 10.0,
                       [{"epoch": 1, "seconds": seconds, "top1": top1}])
            for index, seconds in enumerate(runs, 1)]


def test_learning_rate_is_nvidias_cosine_policy_with_linear_warmup():
    rates = [learning_rate(0.256, epoch, 8, 90) for epoch in range(90)]
    assert rates[0] == pytest.approx(0.032) and rates[7] == pytest.approx(0.256)
    assert rates[8] == pytest.approx(0.256)
    assert rates[49] == pytest.approx(0.5 * (1 + math.cos(math.pi * 41 / 82)) * 0.256)
    assert all(later <= earlier for earlier, later in zip(rates[8:], rates[9:]))
    assert rates[-1] < 0.001
    assert learning_rate(0.1, 0, 0, 1) == pytest.approx(0.1)


def test_ttt_case_ids_parse_and_baseline_files_accept_them(tmp_path):
    case = Case.parse(CASE)
    assert case.time_to_train and case.case_id == CASE
    assert not Case.parse("1n1g_fp32_b8").time_to_train
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(baseline_document(
        {CASE: {"median_ips": 20.0, "time_to_train_s": 40.0, "top1": 0.84}})))
    assert load_baseline_file(path).entries[CASE]["time_to_train_s"] == 40.0


def test_a_convergence_config_with_unknown_settings_is_one_line(tmp_path):
    path = tmp_path / "ttt.json"
    path.write_text(json.dumps({"epochs": 3, "target": 0.8}))
    with pytest.raises(ConfigError, match="unknown settings: target; known: epochs"):
        ConvergenceConfig.from_json_file(path)


def test_time_three_times_the_baseline_is_a_time_regression():
    entry = {"time_to_train_s": 10.0, "top1": 0.9, "reached_target": True}
    verdict, message = judge_time_to_train(CASE, figures(30.0, 31.0, 29.0), entry, 0.8, 8,
                                           0.35, 0.05)
    assert verdict == REGRESSION
    assert message.startswith(f"{CASE}: time: 30.0 s to train is 200.0% longer than the "
                              "baseline 10.0 s (tolerance 35%")
    # Within the band it passes; beyond it with runs that overlap the baseline's, unclear.
    assert judge_time_to_train(CASE, figures(11.0, 12.0, 10.5), entry, 0.8, 8, 0.35,
                               0.05)[0] == PASS
    overlapping = {**entry, "runs_time_to_train_s": [10.0, 30.0, 9.0, 31.0, 10.0]}
    assert judge_time_to_train(CASE, figures(14.0, 30.0, 9.5), overlapping, 0.8, 8, 0.35,
                               0.05)[0] == INCONCLUSIVE


def test_top1_far_below_the_baseline_is_an_accuracy_regression():
    entry = {"time_to_train_s": 30.0, "top1": 0.97, "reached_target": True}
    verdict, message = judge_time_to_train(CASE, figures(30.0, top1=0.84), entry, 0.8, 8,
                                           0.35, 0.05)
    assert verdict == REGRESSION
    assert message == (f"{CASE}: accuracy: top-1 84.0% is 13.0 points below the baseline 97.0% "
                       "(tolerance 5.0 points)")


def test_each_measure_keeps_its_own_verdict_beside_the_cases():
    """A case judged a regression on accuracy alone keeps its time's pass (and the reverse),
    so the exports say which measure failed (results/measures.py reads these keys)."""
    entry = {"time_to_train_s": 30.0, "top1": 0.97, "reached_target": True}
    assert measure_verdicts(figures(30.0, top1=0.84), entry, 0.35, 0.05) == {
        "time_verdict": PASS, "accuracy_verdict": REGRESSION}
    longer = {**entry, "time_to_train_s": 10.0, "top1": 0.9}
    assert measure_verdicts(figures(30.0, 31.0, 29.0), longer, 0.35, 0.05) == {
        "time_verdict": REGRESSION, "accuracy_verdict": PASS}
    assert measure_verdicts(figures(5.0, 6.0, 5.5), longer, 0.35, 0.05)["time_verdict"] == \
        IMPROVEMENT
    # Not judged: no baseline, no baseline top-1, a run short of the target.
    assert measure_verdicts(figures(30.0), None, 0.35, 0.05) == {
        "time_verdict": None, "accuracy_verdict": None}
    assert measure_verdicts(figures(30.0), {"time_to_train_s": 30.0}, 0.35, 0.05) == {
        "time_verdict": PASS, "accuracy_verdict": None}
    assert measure_verdicts(figures(30.0, reached=False), entry, 0.35, 0.05) == {
        "time_verdict": None, "accuracy_verdict": None}
    # The row's measures read them.
    row = {"kind": "time-to-train", "time_to_train_s": 30.0, "top1": 0.84, "verdict": REGRESSION,
           **measure_verdicts(figures(30.0, top1=0.84), entry, 0.35, 0.05)}
    assert [(value.measure.slug, value.verdict) for value in measures_of(CASE, row)] == [
        ("time-to-train", PASS), ("top-1", REGRESSION)]


def test_a_run_short_of_the_target_is_not_converged():
    entry = {"time_to_train_s": 30.0, "top1": 0.84, "reached_target": True, "epochs": 3}
    verdict, message = judge_time_to_train(CASE, figures(5.0, top1=0.5, reached=False), entry,
                                           0.8, 1, 0.35, 0.05)
    assert verdict == NOT_CONVERGED
    assert message == (f"{CASE}: did not reach the target top-1 80.0% within 1 epochs in 1 of 1 "
                       "runs (top-1 at the end 50.0%); the baseline reached it in 30.0 s "
                       "(3 epochs)")


def test_the_smallest_longer_time_its_rule_could_have_caught():
    """3 runs against 3 (p >= 1/20): a regression needs every run beyond the band, so from
    deviations {-10%, 0, +10%} the fastest run decides (a draw of three holds it 70% of the time,
    fewer than the power): the figure is where a run 10% faster than the slowed median is still
    beyond the band, and judge_time_to_train says so of such runs, and not a step short of it."""
    entry = {"time_to_train_s": 40.0, "runs_time_to_train_s": [38.0, 40.0, 42.0],
             "top1": 0.9, "reached_target": True}
    times = [27.0, 30.0, 33.0]
    longer = min_detectable_slowdown(CASE, times, entry["runs_time_to_train_s"], 40.0, 0.35,
                                     lower_is_better=True)
    every_run_beyond = 1.35 / 0.9 - 1
    assert every_run_beyond <= longer <= every_run_beyond + PRECISION

    def verdict_at(slowdown):
        slowed = [40.0 * (1 + slowdown) * seconds / 30.0 for seconds in times]
        return judge_time_to_train(CASE, figures(*slowed), entry, 0.8, 8, 0.35, 0.05)[0]

    assert verdict_at(longer) == REGRESSION and verdict_at(longer - 0.01) == INCONCLUSIVE


def test_one_time_to_train_run_sees_by_the_baselines_runs_or_says_it_cannot():
    """One training has no spread of its own: the baseline's recorded runs stand in, and where
    the entry has fewer than two either, no slowdown can be shown detectable."""
    assert min_detectable_slowdown(CASE, [40.0], [36.0, 40.0, 44.0], 40.0, 0.35,
                                   lower_is_better=True) > 0.35
    assert min_detectable_slowdown(CASE, [40.0], [40.0], 40.0, 0.35,
                                   lower_is_better=True) is None


def test_report_rows_show_time_accuracy_and_the_curve():
    row = {"nodes": 1, "gpus_per_node": 1, "batch_per_device": 8, "precision": "fp32",
           "epochs": 3, "time_to_train_s": 41.5, "median_ips": 19.25, "top1": 0.84375,
           "target_top1": 0.8, "verdict": "pass", "reached_target": True,
           "curve": [[{"epoch": 1, "seconds": 12.0, "train_loss": 2.5, "top1": 0.25,
                       "top5": 1.0, "train_ips": 19.0}]]}
    lines = terminal_table({CASE: row})
    assert "time2train" in lines[0] and "41.5 s" in lines[2] and "84.38%" in lines[2]
    markdown = markdown_section({CASE: row})
    assert "| 1n1g_fp32_b8_ttt | 1 | 8 | fp32 | 3 | 41.5 s | 19.25 | 84.38% | 80.00% | pass |" \
        in markdown
    # Against a baseline: what it could have seen, in both tables.
    judged = {**row, "baseline_time_to_train_s": 40.0, "min_detectable_slowdown": 0.412}
    assert terminal_table({CASE: judged})[2].split()[-2:] == ["41%", "pass"]
    assert "| 40.0 s | 41% | pass |" in markdown_section({CASE: judged})
    assert "| 1 | 1 | 12.0 | 2.500 | 25.00% | 100.00% | 19.0 |" in markdown


def counting(monkeypatch, *methods: str) -> dict[str, int]:
    """Calls of these tensor methods (each a host sync on a GPU) from now on, by name."""
    calls = {name: 0 for name in methods}
    for name in methods:
        original = getattr(torch.Tensor, name)

        def counted(self, *args, _name=name, _original=original, **kwargs):
            calls[_name] += 1
            return _original(self, *args, **kwargs)
        monkeypatch.setattr(torch.Tensor, name, counted)
    return calls


def test_evaluation_counts_on_the_device_and_syncs_once(monkeypatch):
    generator = torch.Generator().manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 4 * 4, 8))
    with torch.no_grad():  # weights from the seeded generator: the global one gave top-1 0 in CI
        for parameter in model.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator))
    sizes = (5, 5, 5, 3)  # the last batch partial, as DALI's PARTIAL policy gives it
    batches = [(torch.randn(size, 3, 4, 4, generator=generator),
                torch.randint(0, 8, (size,), generator=generator)) for size in sizes]
    with torch.no_grad():
        logits = torch.cat([model(images) for images, _ in batches])
    labels = torch.cat([labels for _, labels in batches])
    ranked = logits.argsort(dim=1, descending=True)
    expected_top1 = (ranked[:, 0] == labels).float().mean().item()
    expected_top5 = (ranked[:, :5] == labels.view(-1, 1)).any(dim=1).float().mean().item()

    syncs = counting(monkeypatch, "item", "tolist")
    top1, top5, seen = evaluate(model, lambda: iter(batches), contextlib.nullcontext,
                                torch.device("cpu"), num_classes=8)
    assert syncs == {"item": 0, "tolist": 1}  # not two .item() per batch
    assert seen == 18 and top1 == pytest.approx(expected_top1)
    assert top5 == pytest.approx(expected_top5) and 0 < top1 < top5 < 1
    assert model.training  # left in training mode for the next epoch


@pytest.mark.parametrize("device, workers, pinned, persistent", [
    ("cuda", 2, True, True), ("cpu", 2, False, True), ("cuda", 0, True, False)])
def test_the_validation_loader_pins_for_a_gpu_and_keeps_its_workers(device, workers, pinned,
                                                                    persistent):
    # Built, never iterated: pinned memory needs a GPU only once batches flow.
    loader = validation_loader(list(range(10)), 4, torch.device(device), Shard(1, 3), workers,
                               torch.channels_last)
    assert loader.pin_memory is pinned and loader.persistent_workers is persistent
    assert list(loader.dataset.indices) == [1, 4, 7] and not loader.drop_last


@pytest.fixture(scope="module")
def learnable_dir(tmp_path_factory):
    """4 colour classes, 16 training and 8 validation images each: an epoch is 8 steps of 8."""
    return ensure_learnable_dataset(LearnableDatasetSpec(num_classes=4, train_per_class=16,
                                                         val_per_class=8, side=40),
                                    cache_root=tmp_path_factory.mktemp("learnable"))


def ttt_args(data_dir, *extra):
    return ["--perf-case", CASE, "-k", "ttt", "--perf-data-backend", "dali-cpu",
            "--perf-data-dir", str(data_dir), "--perf-set", "threads=1", "--perf-runs", "1",
            *extra]


@pytest.mark.slow
def test_without_mlperf_logging_time_to_train_runs_and_says_the_log_was_not_written(
        monkeypatch, tmp_path, learnable_dir):
    # As on a host without the package: importing it (or a module of it) raises ImportError.
    for name in [name for name in sys.modules if name.startswith("mlperf_logging.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "mlperf_logging", None)
    config = TrainConfig(batch_per_device=8, precision="fp32", image_size=32, num_classes=4,
                         warmup_iters=0, timed_iters=1, data_backend="dali-cpu",
                         data_dir=str(learnable_dir), device="cpu", threads=1)
    threads = torch.get_num_threads()
    try:  # one thread, as the suite's tests run their workers on a shared 2-core host
        record = train_to_target(config, ConvergenceConfig(epochs=1, target_top1=1.0,
                                                           warmup_epochs=0), Placement(),
                                 tmp_path)
    finally:
        torch.set_num_threads(threads)
    assert record["outcome"] == "ok" and record["epochs"] == 1
    assert record["validation_images"] == 32 and 0 <= record["top1"] <= record["top5"] <= 1
    assert record["mlperf_log"] is None and not (tmp_path / MLPERF_LOG).exists()
    assert record["mlperf_log_note"] == ("not written: mlperf-logging is not installed "
                                         "(pip install mlperf-logging)")


@pytest.mark.slow
def test_a_session_without_mlperf_logging_says_the_log_was_not_written(run_suite, learnable_dir,
                                                                      hide_packages):
    hide_packages("mlperf_logging")
    run = run_suite(*ttt_args(learnable_dir, "--perf-set", "epochs=1", "--perf-set",
                              "target-top1=0.2"))
    assert run.outcome.ret == 0, run.output
    assert run.cases[CASE]["verdict"] == "no-baseline"   # one epoch reaches 20% of four classes
    note = "not written: mlperf-logging is not installed (pip install mlperf-logging)"
    assert run.cases[CASE]["mlperf_log"] == note
    run.outcome.stdout.fnmatch_lines([f"{CASE} run 1/1: * top-1 (1 epochs); MLPerf log {note}"])
    assert not (run.results_dir / CASE / "run-1" / MLPERF_LOG).exists()


def mlperf_events(path):
    from mlperf_logging.compliance_checker.mlp_parser import parse_file
    lines, errors = parse_file(str(path), ruleset=MLPERF_RULESET)
    assert errors == []
    return lines


NO_CHECKER = "mlperf-logging is not installed (pip install mlperf-logging; make test installs it)"


def compliance_check(log, *options) -> subprocess.CompletedProcess:
    """MLPerf's compliance checker on `log`, on its command line, against the ruleset the log
    is written for; the checker's own copy of its output goes beside the log."""
    return subprocess.run([sys.executable, "-m", "mlperf_logging.compliance_checker",
                           "--usage", "training", "--ruleset", MLPERF_RULESET,
                           "--log_output", str(log.with_name("compliance_checker.log")),
                           *options, str(log)], capture_output=True, text=True, timeout=300)


def complaints(checker_output: str) -> dict[str, str]:
    """The checker's messages by the key each names (its one WARNING holds them all, between
    lines of dashes, before ERROR - FAILED): 'Required EXACTLY_ONE occurrence of 'k'...',
    'CHECK for 'k' failed...', 'Failed checks for k : ...'."""
    warning = checker_output.partition("WARNING - ")[2].partition("\nERROR - FAILED")[0]
    found = {}
    for message in warning.split("\n" + "-" * 30 + "\n"):
        named = re.search(r"(?:occurrence of|CHECK for) '(\w+)'|Failed checks for (\w+) :",
                          message)
        if named:
            found[named.group(1) or named.group(2)] = message.strip()
    return found


def test_the_log_is_written_for_the_newest_ruleset_with_resnet_rules():
    checker = pytest.importorskip("mlperf_logging.compliance_checker", reason=NO_CHECKER)
    rules = Path(checker.__file__).parent
    with_resnet = [path.parent.name.removeprefix("training_")
                   for path in rules.glob("training_*/open_resnet.yaml")]
    assert max(with_resnet, key=lambda name: tuple(map(int, name.split(".")))) == MLPERF_RULESET


@pytest.mark.slow
def test_mlperfs_compliance_checker_accepts_the_log_of_a_run_that_reached_its_target(
        run_suite, learnable_dir):
    pytest.importorskip("mlperf_logging.compliance_checker", reason=NO_CHECKER)
    # The set reaches 50% in about 5 epochs of 8 steps, 5 s each on a quiet core.
    run = run_suite(*ttt_args(learnable_dir, "--perf-set", "epochs=8", "--perf-set",
                              "target-top1=0.5"))
    assert run.outcome.ret == 0, run.output
    row = run.cases[CASE]
    assert row["reached_target"] is True and row["top1"] >= 0.5
    log = run.results_dir / CASE / "run-1" / MLPERF_LOG

    checked = compliance_check(log)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stderr.splitlines() == [
        f"INFO - Running compliance on file: {log}",
        f"INFO -  Compliance checks: training_{MLPERF_RULESET}/common.yaml",
        f"INFO -  Compliance checks: training_{MLPERF_RULESET}/open_common.yaml",
        f"INFO -  Compliance checks: training_{MLPERF_RULESET}/open_resnet.yaml",
        "INFO - SUCCESS"]

    # The closed division's own rules (closed_common.yaml and the ResNet SGD rules it pulls
    # in) refuse the recipe, which is why the log says `open`, and a top-1 short of MLPerf's.
    closed = compliance_check(log, "--config", f"training_{MLPERF_RULESET}/closed_common.yaml")
    assert closed.returncode == 1 and "ERROR - FAILED" in closed.stderr, closed.stderr
    refused = complaints(closed.stderr)
    poly_schedule = ["sgd_opt_end_learning_rate", "sgd_opt_learning_rate_decay_poly_power",
                     "sgd_opt_learning_rate_decay_steps"]  # the recipe's LR decay is cosine
    accuracies = [line.value["value"] for line in mlperf_events(log)
                  if line.key == "eval_accuracy"]
    short_of_mlperf = ["eval_accuracy"] if max(accuracies) < MLPERF_TARGET_TOP1 else []
    assert sorted(refused) == sorted([*poly_schedule, "sgd_opt_weight_decay",
                                      *short_of_mlperf]), closed.stderr
    for key in poly_schedule:
        assert refused[key] == f"Required EXACTLY_ONE occurrence of '{key}' but found 0"
    # NVIDIA's 2^-15 is not 0.0001 x 2^k.
    assert "is_integer(math.log2(v['value'] / 0.0001))" in refused["sgd_opt_weight_decay"]
    if short_of_mlperf:
        assert refused["eval_accuracy"] == ("Failed checks for eval_accuracy : "
                                            "v['value'] >= 0.7590 and v['value'] < 1.0")


@pytest.mark.slow
def test_time_to_train_session_then_time_and_accuracy_regressions(run_suite, learnable_dir):
    # One epoch reaches 20% (four classes): the case converges in a few seconds. Against an
    # entry that trained in a millisecond, its time is a regression on any machine (the row,
    # report and log below are those of any converged session; with no entry its verdict is
    # no-baseline: the session without mlperf-logging above).
    faster = run_suite(*ttt_args(learnable_dir, "--perf-set", "epochs=2", "--perf-set",
                                 "target-top1=0.2"), plots=True,
                       baseline=baseline_document({CASE: {
                           "median_ips": 20.0, "reached_target": True, "epochs": 1,
                           "time_to_train_s": 0.001, "top1": 0.2,
                           "environment": {"torch": "1.0.0"}}}))
    assert faster.outcome.ret == 1, faster.output
    row = faster.cases[CASE]
    assert row["verdict"] == "regression" and row["reached_target"] is True
    assert row["time_to_train_s"] > 0 and row["top1"] >= 0.2 and row["target_top1"] == 0.2
    assert row["epochs"] == len(row["curve"][0]) == 1
    assert {"epoch", "seconds", "train_loss", "top1", "top5", "train_ips"} <= set(
        row["curve"][0][0])
    assert row["data_backend"] == "dali-cpu" and row["image_size"] == 32
    assert "mlperf_log" not in row  # written: no note
    faster.outcome.stdout.fnmatch_lines([f"{CASE} run 1/1: * s to *% top-1 (1 epochs)",
                                         "*ResNet50 time to train*"])
    failure = [line for line in faster.outcome.outlines if f"{CASE}: time: " in line]
    assert failure and "longer than the baseline" in failure[0], faster.output
    assert "environment: torch 1.0.0 -> " in failure[0]
    report = (faster.results_dir / "report.md").read_text()
    assert "## Time to train" in report and f"### {CASE}: top-1 per epoch" in report
    assert (faster.results_dir / "time_to_train.png").stat().st_size > 0
    assert not (faster.results_dir / "scaling.png").exists()

    # The MLPerf log reads with mlperf-logging's own parser: run_start ... run_stop success.
    lines = mlperf_events(faster.results_dir / CASE / "run-1" / "mlperf.log")
    keys = [line.key for line in lines]
    assert keys[0] == "init_start" and "run_start" in keys
    assert keys.count("eval_accuracy") == 1 and keys[-1] == "run_stop"
    assert lines[-1].value["metadata"]["status"] == "success"
    accuracy = next(line for line in lines if line.key == "eval_accuracy")
    assert accuracy.value["value"] == pytest.approx(row["top1"])
    assert accuracy.value["metadata"]["epoch_num"] == 1

    # Against an entry that trained for days to 100%: its accuracy, and only that.
    more_accurate = run_suite(*ttt_args(learnable_dir, "--perf-set", "epochs=2",
                                        "--perf-set", "target-top1=0.2"),
                              baseline=baseline_document({CASE: {
                                  "median_ips": row["median_ips"], "reached_target": True,
                                  "epochs": 1, "time_to_train_s": 1e6, "top1": 1.0}}))
    assert more_accurate.outcome.ret == 1, more_accurate.output
    failure = [line for line in more_accurate.outcome.outlines if f"{CASE}: accuracy: " in line]
    assert failure and "below the baseline 100.0%" in failure[0], more_accurate.output
    assert "time:" not in failure[0]


@pytest.mark.slow
def test_a_run_capped_below_the_epochs_it_needs_is_not_converged(run_suite, learnable_dir):
    run = run_suite(*ttt_args(learnable_dir, "--perf-set", "epochs=1", "--perf-set",
                              "target-top1=0.99"),
                    baseline=baseline_document({CASE: {
                        "median_ips": 20.0, "time_to_train_s": 60.0, "top1": 0.99,
                        "reached_target": True, "epochs": 6}}))
    assert run.outcome.ret == 1, run.output
    row = run.cases[CASE]
    assert row["verdict"] == NOT_CONVERGED and row["reached_target"] is False
    assert row["time_to_train_s"] is None and row["runs_reached_target"] == [False]
    run.outcome.stdout.fnmatch_lines([
        f"*{CASE}: did not reach the target top-1 99.0% within 1 epochs in 1 of 1 runs "
        "(top-1 at the end *); the baseline reached it in 60.0 s (6 epochs)*"])
    log = run.results_dir / CASE / "run-1" / MLPERF_LOG
    lines = mlperf_events(log)
    assert lines[-1].key == "run_stop" and lines[-1].value["metadata"]["status"] == "aborted"
    # The checker passes an aborted run too: its rules ask run_stop for a status, any status.
    checked = compliance_check(log)
    assert checked.returncode == 0 and checked.stderr.endswith("INFO - SUCCESS\n"), checked.stderr


@pytest.mark.parametrize("args, words", [
    (["--perf-set", "target-top1=1.5"], "--perf-set: target-top1=1.5: 1.5 must be a top-1 "
                                        "fraction above 0 and at most 1, e.g. 0.759 for 75.9%"),
    (["--perf-set", "epochs=0"], "--perf-set: epochs=0: 0 must be at least 1"),
    (["--perf-set", "accuracy-tolerance=x"], "--perf-set: accuracy-tolerance=x: 'x' is not a "
                                             "number"),
])
def test_bad_time_to_train_options_are_usage_errors(run_suite, args, words):
    run = run_suite("--perf-time-to-train", *args)
    assert run.outcome.ret == 4, run.output
    assert any(words in line for line in run.outcome.errlines), run.output


def test_report_tool_shows_nvidias_published_time_to_train(tmp_path, capsys):
    from tools.report import command as report
    assert report.main(["--published", "ngc-pytorch-time-to-train",
                        "--output-dir", str(tmp_path)]) == 0
    markdown = (tmp_path / "time_to_train.md").read_text()
    assert "| 1n1g_amp_b256_ttt | 1 | 256 | amp | 90 | 137,335 s | 859.24 | 76.63% | 75.90% | - |" \
        in markdown
    assert (tmp_path / "time_to_train.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "137,335 s" in capsys.readouterr().out
