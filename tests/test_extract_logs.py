"""Tests for tools/extract_logs/: logs of each framework written with known speeds, read back
exactly.

Every log measures iterations W+1..T = 6..20 with B = 100 images per device; warm-up iterations and
iterations after T are given absurd timings so that counting them would change the numbers.
"""

import json
import re
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from conftest import REPO_ROOT, run_tool
from tools.extract_logs.command import extract, result_file

WARMUP_BATCHES = 5
TRAIN_BATCHES = 20
BATCH_SIZE = 100
SLOW = 9.0  # seconds of a warm-up or late iteration; never part of a measured speed


def ngc_log(step_seconds, iterations=25):
    """NGC DLLogger: iterations W+1..T take step_seconds; a second epoch restarts the numbering."""
    clock = datetime(2020, 9, 15, 14, 29, 16, 538463)
    stamp = lambda: f"DLL {clock:%Y-%m-%d %H:%M:%S.%f}"  # noqa: E731
    lines = [
        f"{stamp()} - PARAMETER data : /data/imagenet  batch_size : {BATCH_SIZE}  arch : resnet50 ",
        "some launcher noise: NCCL INFO Ring 00 : 0[0] -> 1[1]",
    ]
    for epoch in (0, 1):
        for iteration in range(1, iterations + 1):
            measured = epoch == 0 and WARMUP_BATCHES < iteration <= TRAIN_BATCHES
            clock += timedelta(seconds=step_seconds if measured else SLOW)
            lines.append(
                f"{stamp()} - Epoch: {epoch} Iteration: {iteration}  train.loss : 6.72415  "
                "train.total_ips : 99999.99 img/s"
            )
        clock += timedelta(seconds=SLOW)
        lines.append(f"{stamp()} - Epoch: {epoch}  train.loss : 6.71  train.total_ips : 1.00 img/s")
        # Validation reuses the training iteration numbers, later in the epoch.
        lines.append(f"{stamp()} - Epoch: {epoch} Iteration: {TRAIN_BATCHES}  val.loss : 6.90  val.top1 : 0.10")
    lines.append(f"{stamp()} - Summary: train.loss : 6.70  train.total_ips : 1.00 img/s")
    return "\n".join(lines) + "\n"


def pytorch_examples_log(rank_seconds, iterations=25):
    """pytorch/examples imagenet: rank r takes rank_seconds[r] per measured iteration; ranks
    interleave."""
    lines = ["=> creating model 'resnet50'"]
    ranks = list(range(len(rank_seconds)))
    for epoch in (0, 1):
        for iteration in range(iterations + 1):
            shift = iteration % len(ranks)
            for rank in ranks[shift:] + ranks[:shift]:
                measured = epoch == 0 and WARMUP_BATCHES < iteration <= TRAIN_BATCHES
                seconds = rank_seconds[rank] if measured else SLOW
                lines.append(
                    f"Epoch: [{epoch}][{iteration:>5}/10010]\tTime {seconds:6.3f} ({seconds:6.3f})\t"
                    "Data  0.000 ( 0.047)\tLoss 6.9e+00 (6.9e+00)\tAcc@1   0.00 (  0.10)\tAcc@5   0.39 (  0.49)"
                )
        lines.append(f"Test: [  0/196]\tTime {SLOW:6.3f} ({SLOW:6.3f})\tLoss 6.9e+00 (6.9e+00)")
        lines.append(" * Acc@1 0.100 Acc@5 0.500")
    return "\n".join(lines) + "\n"


def mxnet_log(speed, batches=25):
    """MXNet gluon-cv: batches W+1..T print speed - 10, speed + 10, speed in turn (mean: speed)."""
    lines = ["INFO:root:Namespace(batch_size=100, model='resnet50_v1b', num_gpus=8)"]
    for epoch in (0, 1):
        for batch in range(1, batches + 1):
            measured = epoch == 0 and WARMUP_BATCHES < batch <= TRAIN_BATCHES
            printed = speed + (-10, 10, 0)[batch % 3] if measured else SLOW
            lines.append(
                f"INFO:root:Epoch[{epoch}] Batch[{batch}]\tSpeed: {printed:.2f} samples/sec\t"
                "accuracy=0.001000\ttop_k_accuracy_5=0.005000"
            )
        lines.append(f"INFO:root:[Epoch {epoch}] training: accuracy=0.001000")
        lines.append(f"INFO:root:[Epoch {epoch}] time cost: 1234.5")
    return "\n".join(lines) + "\n"


def mindspore_log(rank_epoch_ms, sink_epochs=6, steps=5):
    """MindSpore data sink of 5 steps: sink epochs 2..4 (steps 6..20) take rank_epoch_ms[r] on rank
    r.

    Ranks are merged the way mpirun merges them: each rank's pair back to back in even epochs,
    every rank's "epoch:" line before any "epoch time" line in odd epochs.
    """
    lines = ["[WARNING] ME(1234:139,MainProcess):2021-01-05-10:00:00.000.000 [mindspore/train/model.py:600] noise"]
    for epoch in range(1, sink_epochs + 1):
        measured = 2 <= epoch <= 4
        times = [
            f"epoch time: {ms if measured else SLOW * 1000:.3f} ms, per step time: {ms / steps:.3f} ms"
            for ms in rank_epoch_ms
        ]
        losses = [f"epoch: {epoch} step: {steps}, loss is 6.8123" for _ in rank_epoch_ms]
        if epoch % 2 == 0:
            lines += [line for pair in zip(losses, times) for line in pair]
        else:
            lines += losses + times[::-1]
    return "\n".join(lines) + "\n"


def write_runs(log_dir, config, logs):
    folder = log_dir / config
    folder.mkdir(parents=True, exist_ok=True)
    for run, text in enumerate(logs, start=1):
        (folder / f"rn50_b{BATCH_SIZE}_fp32_{run}.log").write_text(text)


def summary_of(average_speed, median_speed, speedup):
    return {
        "average_speed": average_speed,
        "median_speed": median_speed,
        "speedup": speedup,
        "batch_size_per_device": BATCH_SIZE,
    }


def run_extract(log_dir, warmup_batches=WARMUP_BATCHES, train_batches=TRAIN_BATCHES):
    return extract(log_dir, warmup_batches, train_batches, BATCH_SIZE)


def assert_speeds_and_summary(log_dir, speeds, summaries):
    """Every run under log_dir gives its speed, in order, and each config `summary_of(*figures)`."""
    summary, per_file_speeds, errors = run_extract(log_dir)
    assert errors == []
    assert [round(speed, 2) for speed in per_file_speeds.values()] == speeds
    assert summary == {"rn50": {config: summary_of(*figures) for config, figures in summaries.items()}}


def test_ngc_speed_comes_from_timestamps_of_iterations_w_and_t(tmp_path):
    # devices * 100 img / step seconds: 1n1g 400, 500, 800; 1n4g 1600, 1600, 2000;
    # 2n8g (16 devices) 6400, 8000, 8000, 10000, 12800.
    write_runs(tmp_path, "1n1g", [ngc_log(s) for s in (0.25, 0.2, 0.125)])
    write_runs(tmp_path, "1n4g", [ngc_log(s) for s in (0.25, 0.25, 0.2)])
    write_runs(tmp_path, "2n8g", [ngc_log(s) for s in (0.25, 0.2, 0.2, 0.16, 0.125)])

    assert_speeds_and_summary(
        tmp_path, [400.0, 500.0, 800.0, 1600.0, 1600.0, 2000.0, 6400.0, 8000.0, 8000.0, 10000.0, 12800.0],
        {"1n1g": (566.67, 500.0, 1.0), "1n4g": (1733.33, 1600.0, 3.2), "2n8g": (9040.0, 8000.0, 16.0)})


def test_pytorch_examples_speed_averages_time_over_all_ranks(tmp_path):
    # devices * 100 img / mean Time: 1n1g 200, 250, 400; 1n4g (rank means 0.4, 0.5, 0.32) 1000, 800,
    # 1250.
    write_runs(tmp_path, "1n1g", [pytorch_examples_log([s]) for s in (0.5, 0.4, 0.25)])
    write_runs(
        tmp_path,
        "1n4g",
        [
            pytorch_examples_log([0.3, 0.5, 0.4, 0.4]),
            pytorch_examples_log([0.45, 0.55, 0.5, 0.5]),
            pytorch_examples_log([0.3, 0.34, 0.32, 0.32]),
        ],
    )

    assert_speeds_and_summary(tmp_path, [200.0, 250.0, 400.0, 1000.0, 800.0, 1250.0],
                              {"1n1g": (283.33, 250.0, 1.0), "1n4g": (1016.67, 1000.0, 4.0)})


def test_mxnet_speed_is_the_mean_printed_speed(tmp_path):
    write_runs(tmp_path, "1n1g", [mxnet_log(s) for s in (400, 380, 450)])
    write_runs(tmp_path, "1n8g", [mxnet_log(s) for s in (3000, 3100, 2950)])

    assert_speeds_and_summary(tmp_path, [400.0, 380.0, 450.0, 3000.0, 3100.0, 2950.0],
                              {"1n1g": (410.0, 400.0, 1.0), "1n8g": (3016.67, 3000.0, 7.5)})


def test_mxnet_speedometer_batch_ranges_count_by_their_last_batch(tmp_path):
    speedometer = "".join(
        f"INFO:root:Epoch[0] Batch [{end - 5}-{end}]\tSpeed: {speed:.2f} samples/sec\taccuracy=0.001000\n"
        for end, speed in ((5, SLOW), (10, 390), (15, 410), (20, 400), (25, SLOW))
    )
    write_runs(tmp_path, "1n8g", [speedometer])

    _, per_file_speeds, errors = run_extract(tmp_path)

    assert errors == []
    assert per_file_speeds == {"1n8g/rn50_b100_fp32_1.log": pytest.approx(400.0)}


def test_mindspore_speed_averages_sink_epoch_time_over_ranks(tmp_path):
    # devices * 100 img * 15 steps / (3 epochs * mean epoch seconds):
    # 1n1g 1000, 1250, 800; 1n8g (rank means 500, 400, 640 ms) 8000, 10000, 6250.
    spread = [-70, -50, -30, -10, 10, 30, 50, 70]
    write_runs(tmp_path, "1n1g", [mindspore_log([ms]) for ms in (500, 400, 625)])
    write_runs(tmp_path, "1n8g", [mindspore_log([ms + d for d in spread]) for ms in (500, 400, 640)])

    assert_speeds_and_summary(tmp_path, [1000.0, 1250.0, 800.0, 8000.0, 10000.0, 6250.0],
                              {"1n1g": (1016.67, 1000.0, 1.0), "1n8g": (8083.33, 8000.0, 8.0)})


@pytest.mark.parametrize(
    "warmup_batches, train_batches, counted_epochs",
    [
        (5, 20, [2, 3, 4]),
        (3, 22, [2, 3, 4]),  # a partly warm epoch 1 and a partly counted epoch 5 are left out
        (5, 10, [2]),
        (0, 30, [1, 2, 3, 4, 5, 6]),
    ],
)
def test_mindspore_window_is_rounded_inwards_to_sink_boundaries(tmp_path, warmup_batches, train_batches, counted_epochs):
    write_runs(tmp_path, "1n1g", [mindspore_log([500])])

    _, per_file_speeds, errors = run_extract(tmp_path, warmup_batches, train_batches)

    epoch_seconds = [0.5 if 2 <= epoch <= 4 else SLOW for epoch in counted_epochs]
    assert errors == []
    assert per_file_speeds == {
        "1n1g/rn50_b100_fp32_1.log": pytest.approx(BATCH_SIZE * 5 * len(counted_epochs) / sum(epoch_seconds))
    }


def test_format_is_recognised_by_content_not_file_name(tmp_path):
    folder = tmp_path / "1n4g"
    folder.mkdir()
    (folder / "mindspore_b100_fp32_1.log").write_text(ngc_log(0.25))
    (folder / "ngc_b100_fp32_2.log").write_text(pytorch_examples_log([0.4] * 4))
    (folder / "pytorch_b100_fp32_3.log").write_text(mxnet_log(1200))
    (folder / "mxnet_b100_fp32_4.log").write_text(mindspore_log([500] * 4))

    _, per_file_speeds, errors = run_extract(tmp_path)

    assert errors == []
    assert {name: round(speed, 2) for name, speed in per_file_speeds.items()} == {
        "1n4g/mindspore_b100_fp32_1.log": 1600.0,
        "1n4g/mxnet_b100_fp32_4.log": 4000.0,
        "1n4g/ngc_b100_fp32_2.log": 1000.0,
        "1n4g/pytorch_b100_fp32_3.log": 1200.0,
    }


@pytest.mark.parametrize(
    "short_log, stops_at",
    [
        (ngc_log(0.25, iterations=15), "iteration 15"),
        (pytorch_examples_log([0.4, 0.4], iterations=15), "iteration 15"),
        (mxnet_log(400, batches=15), "iteration 15"),
        (mindspore_log([500, 500], sink_epochs=3), "step 15"),
    ],
    ids=["ngc", "pytorch_examples", "mxnet", "mindspore"],
)
def test_short_and_unknown_logs_are_one_line_errors_and_other_runs_still_count(tmp_path, short_log, stops_at):
    write_runs(tmp_path, "1n1g", [ngc_log(0.25), ngc_log(0.2)])
    short_file = tmp_path / "1n1g" / "rn50_b100_fp32_3.log"
    short_file.write_text(short_log)
    unknown_file = tmp_path / "1n1g" / "rn50_b100_fp32_4.log"
    unknown_file.write_text("Traceback (most recent call last):\n  RuntimeError: NCCL error\n")

    summary, per_file_speeds, errors = run_extract(tmp_path)

    assert len(errors) == 2
    assert all("\n" not in error for error in errors)
    assert errors[0].startswith(f"{short_file}: ")
    assert f"stops at {stops_at}, before --train_batches 20" in errors[0]
    assert errors[1].startswith(f"{unknown_file}: matches no known log format")
    assert list(per_file_speeds) == ["1n1g/rn50_b100_fp32_1.log", "1n1g/rn50_b100_fp32_2.log"]
    assert summary == {"rn50": {"1n1g": summary_of(450.0, 450.0, 1.0)}}


def test_ngc_counts_only_the_first_epoch(tmp_path):
    # Epoch 0 stops at iteration 15; epoch 1's line of iteration 20 must not complete the window.
    first_epoch_cut_at_15 = "".join(
        line for line in ngc_log(0.25).splitlines(keepends=True) if not re.search(r"Epoch: 0 Iteration: (1[6-9]|2\d)\b", line)
    )
    write_runs(tmp_path, "1n1g", [first_epoch_cut_at_15])

    summary, per_file_speeds, errors = run_extract(tmp_path)

    assert per_file_speeds == {}
    assert summary == {"rn50": {}}
    assert len(errors) == 1 and "NGC PyTorch log stops at iteration 15" in errors[0]


def test_mindspore_epoch_time_belongs_to_the_nearest_earlier_epoch_line(tmp_path):
    # Rank 1 lags: its epoch 1 time comes after rank 0 has printed all of epoch 2.
    lagging_rank = "\n".join(
        [
            "epoch: 1 step: 5, loss is 6.9",  # rank 0
            "epoch time: 9000.000 ms, per step time: 1800.000 ms",  # rank 0, epoch 1
            "epoch: 1 step: 5, loss is 6.9",  # rank 1
            "epoch: 2 step: 5, loss is 6.8",  # rank 0
            "epoch time: 500.000 ms, per step time: 100.000 ms",  # rank 0, epoch 2
            "epoch time: 9000.000 ms, per step time: 1800.000 ms",  # rank 1, epoch 1
            "epoch: 2 step: 5, loss is 6.8",  # rank 1
            "epoch time: 700.000 ms, per step time: 140.000 ms",  # rank 1, epoch 2
        ]
    )
    write_runs(tmp_path, "1n2g", [lagging_rank])

    _, per_file_speeds, errors = run_extract(tmp_path, warmup_batches=5, train_batches=10)

    # 2 devices * 100 img * 5 steps / mean(0.5 s, 0.7 s)
    assert errors == []
    assert {name: round(speed, 2) for name, speed in per_file_speeds.items()} == {"1n2g/rn50_b100_fp32_1.log": 1666.67}


def test_mindspore_window_inside_one_sink_epoch_is_an_error(tmp_path):
    write_runs(tmp_path, "1n1g", [mindspore_log([500])])

    _, per_file_speeds, errors = run_extract(tmp_path, warmup_batches=6, train_batches=9)

    assert per_file_speeds == {}
    assert len(errors) == 1 and "no whole sink epoch of 5 steps inside steps 7..9" in errors[0]


def test_other_folders_and_files_are_ignored_and_speedup_needs_1n1g(tmp_path):
    write_runs(tmp_path, "1n4g", [mxnet_log(s) for s in (1000, 1100, 1600)])
    write_runs(tmp_path, "16n8g", [mxnet_log(s) for s in (30000, 32000, 40000)])
    write_runs(tmp_path, "1n1g_old", [mxnet_log(1)])
    write_runs(tmp_path, "summary", [mxnet_log(1)])
    (tmp_path / "1n4g" / "nvidia-smi.txt").write_text("INFO:root:Epoch[0] Batch[21]\tSpeed: 1.00 samples/sec\n")
    (tmp_path / "1n1g.log").write_text(mxnet_log(1))

    summary, per_file_speeds, errors = run_extract(tmp_path)

    assert errors == []
    assert len(per_file_speeds) == 6
    assert summary == {
        "rn50": {
            "1n4g": summary_of(1233.33, 1100.0, None),
            "16n8g": summary_of(34000.0, 32000.0, None),
        }
    }


@pytest.mark.parametrize(
    "warmup_batches, train_batches, batch_size, message",
    [
        (20, 20, 100, "--warmup_batches 20 must be smaller than --train_batches 20"),
        (-1, 20, 100, "must be >= 0"),
        (5, 20, 0, "--batch_size_per_device > 0"),
    ],
)
def test_extract_rejects_bad_arguments(tmp_path, warmup_batches, train_batches, batch_size, message):
    with pytest.raises(ValueError, match=message):
        extract(tmp_path, warmup_batches, train_batches, batch_size)
    with pytest.raises(ValueError, match="is not a directory"):
        extract(tmp_path / "missing", WARMUP_BATCHES, TRAIN_BATCHES, BATCH_SIZE)


def test_result_file_is_named_after_the_last_part_of_the_log_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pytorch").mkdir()
    assert result_file("pytorch/", "out") == Path("out/pytorch_result.json")
    assert result_file(str(tmp_path / "pytorch") + "/", "out") == Path("out/pytorch_result.json")
    monkeypatch.chdir(tmp_path / "pytorch")
    assert result_file(".", "out") == Path("out/pytorch_result.json")


def run_cli(*arguments, cwd=REPO_ROOT):
    return run_tool("extract-logs", *arguments, cwd=cwd, timeout=60)


def test_cli_prints_speeds_and_summary_and_writes_json(tmp_path):
    log_dir = tmp_path / "ngc_pytorch"
    write_runs(log_dir, "1n1g", [ngc_log(s) for s in (0.25, 0.2, 0.125)])
    write_runs(log_dir, "1n8g", [pytorch_examples_log([0.25] * 8), pytorch_examples_log([0.2] * 8)])
    (log_dir / "1n8g" / "rn50_b100_fp32_3.log").write_text("nothing useful\n")

    result = run_cli(
        "--log_dir", f"{log_dir}/", "--warmup_batches", WARMUP_BATCHES, "--train_batches", TRAIN_BATCHES,
        "--batch_size_per_device", BATCH_SIZE, "--output_dir", tmp_path / "result",
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    assert result.stderr == f"{log_dir / '1n8g' / 'rn50_b100_fp32_3.log'}: matches no known log format (" \
        "NGC PyTorch, pytorch/examples, MXNet gluon-cv, MindSpore); " \
        "move it out of the log folder or check that it is a training log\n"  # fmt: skip
    lines = result.stdout.splitlines()
    assert lines[:5] == [
        "1n1g/rn50_b100_fp32_1.log: 400.00 img/s",
        "1n1g/rn50_b100_fp32_2.log: 500.00 img/s",
        "1n1g/rn50_b100_fp32_3.log: 800.00 img/s",
        "1n8g/rn50_b100_fp32_1.log: 3200.00 img/s",
        "1n8g/rn50_b100_fp32_2.log: 4000.00 img/s",
    ]
    assert lines[6].split() == ["config", "average_speed", "median_speed", "speedup", "batch_size_per_device"]
    assert lines[7].split() == ["1n1g", "566.67", "500.00", "1.00", "100"]
    assert lines[8].split() == ["1n8g", "3600.00", "3600.00", "7.20", "100"]
    output_file = tmp_path / "result" / "ngc_pytorch_result.json"
    assert lines[-1] == f"wrote {output_file}"
    assert json.loads(output_file.read_text()) == {
        "rn50": {
            "1n1g": summary_of(566.67, 500.0, 1.0),
            "1n8g": summary_of(3600.0, 3600.0, 7.2),
        }
    }


def test_cli_writes_null_speedup_without_1n1g_to_default_output_dir(tmp_path):
    write_runs(tmp_path / "logs", "1n8g", [mxnet_log(s) for s in (3000, 3200)])

    result = run_cli(
        "--log_dir", "logs", "--warmup_batches", WARMUP_BATCHES, "--train_batches", TRAIN_BATCHES,
        "--batch_size_per_device", BATCH_SIZE, cwd=tmp_path,
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[4].split() == ["1n8g", "3100.00", "3100.00", "n/a", "100"]
    assert json.loads((tmp_path / "result" / "logs_result.json").read_text()) == {
        "rn50": {"1n8g": summary_of(3100.0, 3100.0, None)}
    }


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--warmup_batches", "20", "--train_batches", "20"], "--warmup_batches 20 must be smaller than --train_batches 20"),
        (["--warmup_batches", "-1", "--train_batches", "20"], "argument --warmup_batches: -1 must be at least 0"),
        (["--warmup_batches", "five", "--train_batches", "20"], "argument --warmup_batches: 'five' is not a whole number"),
        (["--warmup_batches", "5", "--train_batches", "20", "--log_dir", "missing"], "--log_dir missing is not a directory"),
        (["--warmup_batches", "5"], "the following arguments are required: --train_batches"),
    ],
)
def test_cli_bad_arguments_are_one_line_usage_errors(tmp_path, arguments, message):
    (tmp_path / "logs").mkdir()

    result = run_cli("--log_dir", "logs", "--batch_size_per_device", BATCH_SIZE, *arguments, cwd=tmp_path)

    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_cli_fails_in_one_line_when_no_log_gives_a_speed(tmp_path):
    (tmp_path / "logs" / "1n1g").mkdir(parents=True)

    result = run_cli(
        "--log_dir", "logs", "--warmup_batches", WARMUP_BATCHES, "--train_batches", TRAIN_BATCHES,
        "--batch_size_per_device", BATCH_SIZE, cwd=tmp_path,
    )  # fmt: skip

    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "rn50-perf extract-logs: error: no log under logs gave a speed; "
        "check the lines above and that it holds <N>n<G>g/*.log folders"
    ]
    assert not (tmp_path / "result").exists()


@pytest.mark.parametrize("name", ["r50_b256_fp16_1.log", "rn50-bs256-amp.log", "b256_1.log"])
def test_a_file_named_for_another_batch_is_one_line_and_not_counted(tmp_path, name):
    # Taken at batch 100, this file's speed would be scaled by 100 instead of 256.
    write_runs(tmp_path, "1n1g", [ngc_log(0.25)])
    other = tmp_path / "1n1g" / name
    other.write_text(ngc_log(0.25))

    summary, per_file_speeds, errors = run_extract(tmp_path)

    assert errors == [f"{other}: its name says batch 256 per device, but --batch_size_per_device "
                      "is 100; extract it with --batch_size_per_device 256 or move it out of the "
                      "log folder"]
    assert list(per_file_speeds) == ["1n1g/rn50_b100_fp32_1.log"]


def test_file_names_without_a_batch_or_with_the_same_one_count(tmp_path):
    write_runs(tmp_path, "1n1g", [ngc_log(0.25)])
    for name in ("run_1.log", "rn50_b100_fp32_x.log", "bert_base_fp32.log", "rn50_fp32_b1.log"):
        (tmp_path / "1n1g" / name).write_text(ngc_log(0.25))
    _, per_file_speeds, errors = run_extract(tmp_path)
    assert len(errors) == 1 and "rn50_fp32_b1.log: its name says batch 1 per device" in errors[0]
    assert len(per_file_speeds) == 4
