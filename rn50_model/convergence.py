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

import dataclasses
import functools
import json
import logging
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .config import ConfigError, TrainConfig
from .startup import Placement, barrier, record_header, start_worker, synchronizer

MLPERF_TARGET_TOP1 = 0.759   # MLPerf Training's ResNet50 v1.5 quality target on ImageNet
NVIDIA_EPOCHS = 90
NVIDIA_WARMUP_EPOCHS = 8
VAL_RESIZE_RATIO = 0.875     # NVIDIA's val pipeline: resize the shorter side to 256, crop 224
MLPERF_LOG = "mlperf.log"
MLPERF_LOG_MISSING = "not written: mlperf-logging is not installed (pip install mlperf-logging)"
# The compliance checker's training ruleset this log is written for: the last with ResNet rules
# (MLPerf Training dropped ResNet after 4.0; on a later ruleset the checker stops with a
# FileNotFoundError for its open_resnet.yaml).
MLPERF_RULESET = "4.0.0"
MLPERF_ORG = "rn50-perf"     # submission_org: the tool that ran it; nobody submits these runs
# Keys of the checker's ResNet rules (closed_resnet_sgd.yaml) that mllog.constants lacks.
SGD_OPT_BASE_LR = "sgd_opt_base_learning_rate"
SGD_OPT_MOMENTUM = "sgd_opt_momentum"
SGD_OPT_WEIGHT_DECAY = "sgd_opt_weight_decay"


@dataclass
class ConvergenceConfig:
    """How long to train and when to stop; the training itself is the `TrainConfig`."""
    epochs: int = NVIDIA_EPOCHS
    target_top1: float = MLPERF_TARGET_TOP1
    warmup_epochs: int = NVIDIA_WARMUP_EPOCHS
    val_dir: str | None = None   # default: <data_dir>/val

    def validate(self) -> None:
        if self.epochs < 1:
            raise ConfigError(f"epochs must be at least 1, got {self.epochs}")
        if not 0 < self.target_top1 <= 1:
            raise ConfigError(f"target_top1 must be a fraction in (0, 1], got {self.target_top1}")
        if not 0 <= self.warmup_epochs < max(self.epochs, 1) + 1:
            raise ConfigError(f"warmup_epochs must be 0 to epochs ({self.epochs}), got "
                              f"{self.warmup_epochs}")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json_file(cls, path: str | Path) -> "ConvergenceConfig":
        try:
            values = json.loads(Path(path).read_text())
        except (OSError, ValueError) as error:
            raise ConfigError(f"cannot read time-to-train config {path}: {error}") from None
        known = {spec.name for spec in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known) if isinstance(values, dict) else ["(not an object)"]
        if unknown:
            raise ConfigError(f"time-to-train config {path} has unknown settings: "
                              f"{', '.join(unknown)}; known: {', '.join(sorted(known))}")
        return cls(**values)


def learning_rate(base_lr: float, epoch: int, warmup_epochs: int, epochs: int) -> float:
    """NVIDIA's `lr_cosine_policy` for 0-based `epoch`: linear warm-up to `base_lr` over
    `warmup_epochs`, then a cosine decay to 0 at `epochs`."""
    if epoch < warmup_epochs:
        return base_lr * (epoch + 1) / warmup_epochs
    decay_epochs = max(epochs - warmup_epochs, 1)
    return 0.5 * (1 + math.cos(math.pi * (epoch - warmup_epochs) / decay_epochs)) * base_lr


def validation_folder(config: TrainConfig, convergence: ConvergenceConfig) -> Path:
    """`val_dir`, else `<data_dir>/val`: ImageNet's layout, one folder per class."""
    from .dataset import resolve_data_dir
    if convergence.val_dir:
        return resolve_data_dir(convergence.val_dir)
    if not config.data_dir:
        raise ConfigError("time-to-train needs a data dir with train/ and val/ (ImageNet "
                          "layout); pass --data-dir")
    root = Path(config.data_dir)
    if root.name == "train":
        root = root.parent
    if not (root / "val").is_dir():
        raise ConfigError(f"data dir {root} has no val/ folder; time-to-train evaluates on "
                          f"{root}/val/<class>/*.JPEG")
    return resolve_data_dir(root / "val")


def validation_batches(config: TrainConfig, folder: Path, device, shard, threads: int):
    """A function that returns one pass over this rank's shard of the validation set: NVIDIA's
    val pipeline (decode, resize the shorter side to size / 0.875, centre crop, normalize)."""
    if config.data_backend in ("dali-cpu", "dali-gpu"):
        return _dali_validation(config, folder, device, shard, threads)
    if config.data_backend == "torch":
        return _torch_validation(config, folder, device, shard, threads)
    raise ConfigError("time-to-train measures accuracy on real images; the synthetic backend "
                      "has none: use dali-cpu, dali-gpu or torch")


def validation_pipeline(config, folder: Path, shard, device_id: int | None, threads: int,
                        layout: str):
    """NVIDIA's DALI val pipeline: decode, resize the shorter side (no antialias, as NVIDIA's),
    centre crop and normalize; on the GPU where the training pipeline is."""
    import torch
    from nvidia.dali import fn, pipeline_def, types

    from .data import IMAGENET_MEAN, IMAGENET_STD, input_dtype
    decode_on_gpu = config.data_backend == "dali-gpu"

    @pipeline_def(batch_size=config.batch_per_device, num_threads=max(threads, 1),
                  device_id=device_id, seed=config.seed)
    def pipeline():
        jpegs, labels = fn.readers.file(file_root=str(folder), shard_id=shard.rank,
                                        num_shards=shard.world_size, random_shuffle=False,
                                        pad_last_batch=True, name="Reader")
        images = fn.decoders.image(jpegs, device="mixed" if decode_on_gpu else "cpu",
                                   output_type=types.RGB)
        images = fn.resize(images, resize_shorter=round(config.image_size / VAL_RESIZE_RATIO),
                           antialias=False)
        if device_id is not None and not decode_on_gpu:
            images = images.gpu()
        images = fn.crop_mirror_normalize(
            images, crop=(config.image_size, config.image_size),
            dtype=types.FLOAT16 if input_dtype(config) == torch.float16 else types.FLOAT,
            output_layout=layout,
            mean=[255 * m for m in IMAGENET_MEAN], std=[255 * s for s in IMAGENET_STD])
        if device_id is not None:
            labels = labels.gpu()
        return images, labels

    return pipeline()


def _dali_validation(config, folder: Path, device, shard, threads: int):
    from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

    channels_last = config.resolved_memory_format(device.type) == "channels_last"
    device_id = device.index if device.type == "cuda" else None
    pipe = validation_pipeline(config, folder, shard, device_id, threads,
                               layout="HWC" if channels_last else "CHW")
    pipe.build()
    # PARTIAL: the last batch holds only this shard's real images, not the reader's padding,
    # so every validation image is counted exactly once across the ranks.
    iterator = DALIGenericIterator([pipe], ["images", "labels"], reader_name="Reader",
                                   last_batch_policy=LastBatchPolicy.PARTIAL, auto_reset=True)

    def one_pass() -> Iterator:
        for batch in iterator:
            images = batch[0]["images"]
            if channels_last:
                images = images.permute(0, 3, 1, 2)
            yield (images.to(device, non_blocking=True),
                   batch[0]["labels"].reshape(-1).long().to(device, non_blocking=True))
    return one_pass


def _torch_validation(config, folder: Path, device, shard, threads: int):
    import torch

    from .data import BackendUnavailable, input_dtype, normalized_on_device
    from .failures import first_line
    try:
        from torchvision import datasets, transforms
    except Exception as error:
        raise BackendUnavailable(f"data backend 'torch' needs torchvision, which does not "
                                 f"import here ({first_line(error)}); use dali-cpu") from None
    memory_format = (torch.channels_last
                     if config.resolved_memory_format(device.type) == "channels_last"
                     else torch.contiguous_format)
    transform = transforms.Compose([
        transforms.Resize(round(config.image_size / VAL_RESIZE_RATIO)),
        transforms.CenterCrop(config.image_size)])
    loader = validation_loader(datasets.ImageFolder(str(folder), transform=transform),
                               config.batch_per_device, device, shard, threads, memory_format)

    def one_pass() -> Iterator:
        return normalized_on_device(iter(loader), device, input_dtype(config))
    return one_pass


def validation_loader(dataset, batch_size: int, device, shard, workers: int, memory_format):
    """This rank's slice of `dataset` (every `world_size`-th image from its rank, none padded:
    each image counted once) in NVIDIA's loader settings, the last batch kept."""
    import torch

    from .data import uint8_loader
    indices = range(shard.rank, len(dataset), shard.world_size)
    return uint8_loader(torch.utils.data.Subset(dataset, indices), batch_size, workers, device,
                        memory_format)


def evaluate(model, one_pass, autocast, device, num_classes: int) -> tuple[float, float, int]:
    """(top-1, top-5, images) over every rank's shard, the counts all-reduced. The counts stay
    on the device until the end: one host sync per evaluation, not one per batch."""
    import torch
    import torch.distributed as dist
    counts = torch.zeros(3, dtype=torch.int64, device=device)  # top-1 hits, top-5 hits, images
    top_k = min(5, num_classes)
    model.eval()
    with torch.no_grad():
        for images, labels in one_pass():
            with autocast():
                logits = model(images)
            best = logits.float().topk(top_k, dim=1).indices
            hits = best == labels.view(-1, 1)
            counts[0] += hits[:, 0].sum()
            counts[1] += hits.any(dim=1).sum()
            counts[2] += labels.numel()
    model.train()
    if dist.is_initialized():
        dist.all_reduce(counts)
    correct1, correct5, seen = counts.tolist()
    if seen == 0:
        raise ConfigError("the validation set gave no images to evaluate")
    return correct1 / seen, correct5 / seen, int(seen)


def _written(method):
    """A log method that does nothing without mlperf-logging: the run goes on unlogged."""
    @functools.wraps(method)
    def write_if_open(self, *args, **kwargs):
        if self.mllogger is not None:
            method(self, *args, **kwargs)
    return write_if_open


class MlperfLog:
    """MLPerf's `:::MLLOG` lines into `<run_dir>/mlperf.log`, written by rank 0 only: the keys,
    values and order that MLPerf's compliance checker wants of a ResNet run (training ruleset
    4.0.0, the last with ResNet), a method per block of the run. Every value is the run's own.
    Without the mlperf-logging package the run goes on unlogged, and `not_written` says why."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.mllogger = None
        self.not_written = None
        if path is None:
            return
        try:
            from mlperf_logging.mllog import constants
            from mlperf_logging.mllog.mllog import MLLogger
        except ImportError:
            # Optional (the project's GPU machine lacks it): the log is a by-product of the run.
            self.not_written = MLPERF_LOG_MISSING
            return
        self.names = constants
        logger = logging.getLogger(f"rn50_model.mlperf.{id(self)}")
        logger.propagate = False
        logger.setLevel(logging.INFO)
        self.handler = logging.FileHandler(path, mode="w")
        logger.addHandler(self.handler)
        # Each line's file and lineno name the line of this class that wrote its key.
        self.mllogger = MLLogger(logger=logger, default_stack_offset=2)

    def _event(self, key: str, value=None, **metadata) -> None:
        self.mllogger.event(key=key, value=value, metadata=metadata or None)

    def _start(self, key: str, value=None, **metadata) -> None:
        self.mllogger.start(key=key, value=value, metadata=metadata or None)

    def _end(self, key: str, value=None, **metadata) -> None:
        self.mllogger.end(key=key, value=value, metadata=metadata or None)

    @_written
    def init_start(self) -> None:
        self._start(self.names.INIT_START)

    @_written
    def submission(self, placement: Placement, device) -> None:
        """What ran where, as the checker wants each key once: not an organisation's submission
        but this tool's run, so `research`; `open`, as the recipe's cosine LR and weight decay
        are not what the closed division's ResNet rules allow."""
        from .environment import device_name
        names = self.names
        self._event(names.SUBMISSION_BENCHMARK, names.RESNET)
        self._event(names.SUBMISSION_ORG, MLPERF_ORG)
        self._event(names.SUBMISSION_DIVISION, names.OPEN)
        self._event(names.SUBMISSION_STATUS, names.RESEARCH)
        self._event(names.SUBMISSION_PLATFORM, f"{placement.nodes}x{placement.local_world_size} "
                                               f"{device_name(device)}")
        # MLPerf drops the host's page cache before a run; this suite does not (that needs root).
        self._event(names.CACHE_CLEAR, False)

    @_written
    def init_stop(self, config: TrainConfig, convergence: ConvergenceConfig, optimizer,
                  world_size: int, train_samples: int, eval_samples: int) -> None:
        """The run's settings as the optimizer and the data hold them, then init_stop."""
        names = self.names
        self._event(names.SEED, config.seed)
        self._event(names.GLOBAL_BATCH_SIZE, world_size * config.batch_per_device)
        # BatchNorm's statistics span one device's batch: the model has no SyncBatchNorm.
        self._event(names.MODEL_BN_SPAN, config.batch_per_device)
        self._event(names.GRADIENT_ACCUMULATION_STEPS, 1)  # a step per batch
        self._event(names.OPT_NAME, type(optimizer).__name__.lower())
        self._event(SGD_OPT_BASE_LR, config.learning_rate(world_size))
        self._event(SGD_OPT_MOMENTUM, optimizer.param_groups[0]["momentum"])
        # The decay on conv and linear weights; BN parameters and biases have none.
        self._event(SGD_OPT_WEIGHT_DECAY, max(group["weight_decay"]
                                              for group in optimizer.param_groups))
        self._event(names.OPT_LR_WARMUP_EPOCHS, convergence.warmup_epochs)
        self._event(names.OPT_LR_DECAY_SCHEDULE, "cosine")  # learning_rate()
        self._event(names.TRAIN_SAMPLES, train_samples)
        self._event(names.EVAL_SAMPLES, eval_samples)
        self._end(names.INIT_STOP)

    @_written
    def run_start(self) -> None:
        self._start(self.names.RUN_START)

    @_written
    def epoch_start(self, epoch: int) -> None:
        """A block of one epoch (numbered from 1, as MLPerf does) and its training start."""
        self._start(self.names.BLOCK_START, first_epoch_num=epoch, epoch_count=1)
        self._start(self.names.EPOCH_START, epoch_num=epoch)

    @_written
    def epoch_trained(self, epoch: int) -> None:
        self._end(self.names.EPOCH_STOP, epoch_num=epoch)
        self._start(self.names.EVAL_START, epoch_num=epoch)

    @_written
    def evaluated(self, epoch: int, top1: float) -> None:
        self._event(self.names.EVAL_ACCURACY, top1, epoch_num=epoch)
        self._end(self.names.EVAL_STOP, epoch_num=epoch)
        self._end(self.names.BLOCK_STOP, first_epoch_num=epoch)

    @_written
    def run_stop(self, reached_target: bool) -> None:
        names = self.names
        self._end(names.RUN_STOP, status=names.SUCCESS if reached_target else names.ABORTED)
        self.handler.close()


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
