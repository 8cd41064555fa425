"""The path check's loss rule (tools/gpu/cuda_paths.py): a path whose training step diverges fails,
whether a step's loss is not finite or any step ends far above the first; a short run that
climbs and falls as the recipe's first steps do (measured, docs/gpu.md) passes. The rule runs
on stored sequences and through the real checker on CPU, with a step made to diverge for real
(`RN50_FAULT=diverge`)."""
import json
import math

import pytest

from conftest import REPO_ROOT
from tools.gpu.cuda_paths import (FAILED, LOSS_RISE_LIMIT, PASSED, CudaPath, Host, check_paths,
                                  judge, loss_problem)

# Measured on CPU (docs/gpu.md): batch 64, the recipe's LR 0.064, no warm-up, one synthetic
# batch. At 224 px (the H200's fp32 path's batch: 7.077 first there too, 8.174 at step 8):
HEALTHY_224_PX = [7.077, 5.532, 4.722, 5.025, 5.179, 5.267, 6.474, 8.26, 10.572, 11.659]
# At 64 px, seed 1: up to 1.8 times its start within 7 steps, and back.
HEALTHY_NOISY = [7.082, 5.513, 5.037, 6.235, 7.149, 10.447, 12.717, 12.352, 9.773, 7.525]
# At 64 px and 100 times the recipe's learning rate: its last loss alone would not tell.
DIVERGING = [7.034, 150.275, 48.429, 219.349, 7.916, 9.893, 12.311, 13.043, 10.882, 49.145]


def test_a_diverging_sequence_fails_and_a_normal_noisy_one_passes():
    assert loss_problem(HEALTHY_224_PX) is None and loss_problem(HEALTHY_NOISY) is None
    assert loss_problem(DIVERGING) == (
        f"loss diverged: 7.034 -> 219.349 at step 4 of 10, above {LOSS_RISE_LIMIT:g} times its "
        "start")
    # Eight steps of it, as a path runs: back to 1.5 times its start by then, yet it fails.
    assert loss_problem(DIVERGING[:8]).startswith("loss diverged: ")


@pytest.mark.parametrize("losses, words", [
    ([7.0, math.nan, 6.9], "loss not finite at step 2 of 3: nan"),
    ([7.0, 6.5, math.inf], "loss not finite at step 3 of 3: inf"),
    ([7.0, None], "loss not finite at step 2 of 2: None"),
    ([], "no loss recorded"),
])
def test_a_loss_that_is_not_finite_at_any_step_fails(losses, words):
    """amp skips a step whose gradients overflow, so a run can recover to a finite last loss."""
    assert loss_problem(losses) == words


def test_judge_reads_every_steps_loss_and_falls_back_to_first_and_last():
    amp = CudaPath("amp", {"precision": "amp"})
    record = {"outcome": "ok", "first_loss": 7.0, "last_loss": 6.9,
              "losses": [7.0, math.nan, 6.9]}
    assert judge(amp, record) == (FAILED, "loss not finite at step 2 of 3: nan")
    assert judge(amp, {**record, "losses": None}) == (PASSED, "loss 7.000 -> 6.900")


def test_every_path_the_h200_hour_passed_still_passes():
    """docs/gpu-hours/2026-11-25-nvidia-h200/1-paths.json: losses up to 2.4 times the start
    (torch-loader 7.00 -> 16.67) in 8 steps, which a short run without LR warm-up gives."""
    rows = json.loads((REPO_ROOT / "docs" / "gpu-hours" / "2026-11-25-nvidia-h200" /
                       "1-paths.json").read_text())
    ran = [row for row in rows if row.get("record") and row["record"].get("outcome") == "ok"]
    assert len(ran) == 13
    for row in ran:
        assert judge(CudaPath(row["path"]), row["record"])[0] == PASSED, row["path"]


@pytest.mark.slow
def test_the_checker_fails_a_step_made_to_diverge_on_cpu(monkeypatch, tmp_path):
    """The real worker under torchrun, twice: as it is, and at 1000 times the recipe's learning
    rate from its second step on."""
    monkeypatch.setenv("RN50_DATA_CACHE", str(tmp_path))
    common = {"device": "cpu", "precision": "fp32", "data_backend": "synthetic",
              "image_size": 32, "batch_per_device": 4, "warmup_iters": 1, "timed_iters": 5,
              "threads": 1}
    selected = [CudaPath("fp32"), CudaPath("fp32-diverging", fault="diverge@iter=1,times=1000")]
    rows = check_paths(selected, Host(1, {}), common, timeout=300, output=None)
    assert [row["outcome"] for row in rows] == [PASSED, FAILED], rows
    assert len(rows[0]["record"]["losses"]) == 6
    assert rows[1]["note"].startswith(("loss diverged: ", "loss not finite at step ")), rows[1]
