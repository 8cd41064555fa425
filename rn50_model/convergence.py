"""Training to a target accuracy: the epoch loop, evaluation, the LR schedule and the MLPerf log.

NVIDIA's recipe for ResNet50 v1.5 (the `Trainer`'s SGD, label smoothing and weight decay) with
its cosine learning-rate policy and linear warm-up, up to `epochs` epochs, evaluating top-1 and
top-5 on the validation split after every epoch and stopping at `target_top1`. Time-to-train is
MLPerf's: wall clock from the first training step to the evaluation that reaches the target,
evaluation time included. Every rank evaluates its shard of the validation set; the counts are
all-reduced. Rank 0 writes an MLPerf-format log (`:::MLLOG` lines, through the mlperf-logging
package, where it imports; else the record says the log was not written) beside the run's record.

Usable without the suite, through the worker (one process per device, started by torchrun):

    torchrun --standalone --nproc-per-node 8 -m rn50_model.worker --run-dir runs/ttt \\
        --precision amp --batch-per-device 256 --data-backend dali-gpu --data-dir /imagenet \\
        --time-to-train ttt.json      # {"epochs": 90, "target_top1": 0.759, "warmup_epochs": 8}
"""
from __future__ import annotations

import math
import time
from pathlib import Path

from .config import (ConfigError, ConvergenceConfig, TrainConfig)
from .mlperf_log import MLPERF_LOG, MlperfLog
from .startup import Placement, barrier, record_header, start_worker, synchronizer
from .validation import evaluate, validation_batches, validation_folder


def learning_rate(base_lr: float, epoch: int, warmup_epochs: int, epochs: int) -> float:
    """NVIDIA's `lr_cosine_policy` for 0-based `epoch`: linear warm-up to `base_lr` over
    `warmup_epochs`, then a cosine decay to 0 at `epochs`."""
    if epoch < warmup_epochs:
        return base_lr * (epoch + 1) / warmup_epochs
    decay_epochs = max(epochs - warmup_epochs, 1)
    return 0.5 * (1 + math.cos(math.pi * (epoch - warmup_epochs) / decay_epochs)) * base_lr




















def train_to_target(config: TrainConfig, convergence: ConvergenceConfig, placement: Placement,
                    run_dir: Path) -> dict:
    """Train up to `convergence.epochs` epochs, stopping at the target; rank 0's record."""
    import torch

    from .data import Shard, build_batches, training_folder
    from .dataset import count_images
    from .environment import collect_environment
    from .training import Trainer

    convergence.validate()
    if config.data_backend == "synthetic":
        raise ConfigError("time-to-train measures accuracy on real images; the synthetic "
                          "backend has none: use dali-cpu, dali-gpu or torch")
    log = MlperfLog(run_dir / MLPERF_LOG if placement.rank == 0 else None)
    log.init_start()
    device, threads = start_worker(config, placement)
    log.submission(placement, device)
    shard = Shard(placement.rank, placement.world_size, placement.local_rank)
    train_images = count_images(training_folder(config, shard))
    steps_per_epoch = train_images // (placement.world_size * config.batch_per_device)
    if steps_per_epoch < 1:
        raise ConfigError(f"the training set holds {train_images} images, fewer than one global "
                          f"batch ({placement.world_size} x {config.batch_per_device})")
    batches = build_batches(config, device, shard, threads)
    val_folder = validation_folder(config, convergence)
    one_pass = validation_batches(config, val_folder, device, shard, threads)
    trainer = Trainer(config, device, world_size=placement.world_size,
                      distributed=placement.world_size > 1)
    base_lr = config.learning_rate(placement.world_size)
    synchronize = synchronizer(device)
    global_batch = placement.world_size * config.batch_per_device
    log.init_stop(config, convergence, trainer.optimizer, placement.world_size, train_images,
                  count_images(val_folder))

    synchronize()
    barrier()
    start = time.perf_counter()
    log.run_start()
    curve, train_seconds, eval_seconds = [], 0.0, 0.0
    time_to_train = None
    loss = None
    for epoch in range(convergence.epochs):
        lr = learning_rate(base_lr, epoch, convergence.warmup_epochs, convergence.epochs)
        for group in trainer.optimizer.param_groups:
            group["lr"] = lr
        log.epoch_start(epoch + 1)
        epoch_start = time.perf_counter()
        losses = []
        for _ in range(steps_per_epoch):
            loss = trainer.step(*next(batches))
            losses.append(loss)
        synchronize()
        trained = time.perf_counter() - epoch_start
        log.epoch_trained(epoch + 1)
        top1, top5, seen = evaluate(trainer.model, one_pass, trainer.autocast, device,
                                    config.num_classes)
        evaluated = time.perf_counter() - epoch_start - trained
        train_seconds += trained
        eval_seconds += evaluated
        since_start = time.perf_counter() - start
        log.evaluated(epoch + 1, top1)
        curve.append({"epoch": epoch + 1, "seconds": since_start, "train_seconds": trained,
                      "eval_seconds": evaluated, "lr": lr,
                      "train_loss": float(torch.stack(losses).float().mean().item()),
                      "top1": top1, "top5": top5,
                      "train_ips": steps_per_epoch * global_batch / trained})
        if top1 >= convergence.target_top1:
            time_to_train = since_start
            break
    log.run_stop(reached_target=time_to_train is not None)
    images_trained = len(curve) * steps_per_epoch * global_batch
    return {
        **record_header(config, placement, device, threads, mode="time-to-train"),
        "convergence": convergence.to_dict(),
        # Training throughput without the evaluations, so it compares with the throughput cases.
        "global_ips": images_trained / train_seconds,
        "train_seconds": train_seconds,
        "eval_seconds": eval_seconds,
        "elapsed_s": time.perf_counter() - start,
        "reached_target": time_to_train is not None,
        "time_to_train_s": time_to_train,
        "target_top1": convergence.target_top1,
        "epochs": len(curve),
        "max_epochs": convergence.epochs,
        "top1": curve[-1]["top1"],
        "top5": curve[-1]["top5"],
        "best_top1": max(point["top1"] for point in curve),
        "steps_per_epoch": steps_per_epoch,
        "validation_images": seen,
        "last_loss": float(loss.float().item()),
        "curve": curve,
        "mlperf_log": MLPERF_LOG if log.mllogger else None,
        "mlperf_log_note": log.not_written,
        "environment": collect_environment(device),
    }
