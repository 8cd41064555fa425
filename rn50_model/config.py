"""The one dataclass that configures a training run, and its validation.

The suite writes a `TrainConfig` as JSON for the worker; a person running the worker by hand
sets the same fields as command-line flags. Nothing in the workload reads globals.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

PRECISIONS = ("fp32", "tf32", "amp", "bf16")
CPU_PRECISIONS = ("fp32", "bf16")
DATA_BACKENDS = ("synthetic", "dali-gpu", "dali-cpu", "torch")
MEMORY_FORMATS = ("auto", "channels_last", "contiguous")
LOSS_SCALES = ("dynamic", "static")
OPTIMIZER_IMPLS = ("auto", "fused", "foreach", "for-loop")
DEVICES = ("auto", "cuda", "cpu")
# The process group's backend: auto is NCCL on CUDA, gloo on CPU; gloo also carries CUDA tensors
# (through the host), which is how ranks that share one CUDA device talk where NCCL refuses them.
DIST_BACKENDS = ("auto", "nccl", "gloo")
C = TypeVar("C")   # a config dataclass

# NVIDIA's reference recipe for ResNet50 v1.5 (DeepLearningExamples, as DLPerf measured it).
MOMENTUM = 0.875
WEIGHT_DECAY = 3.0517578125e-05
LABEL_SMOOTHING = 0.1
LR_PER_256_IMAGES = 0.256


class ConfigError(ValueError):
    """A setting the workload cannot run with; the message is one line that says what to do."""


@dataclass
class TrainConfig:
    batch_per_device: int = 256
    precision: str = "amp"
    image_size: int = 224
    num_classes: int = 1000
    warmup_iters: int = 20
    timed_iters: int = 100
    data_backend: str = "synthetic"
    data_dir: str | None = None
    data_workers: int | None = None
    memory_format: str = "auto"
    loss_scale: str = "dynamic"
    static_loss_scale: float = 128.0
    optimizer_impl: str = "auto"
    compile: bool = False
    cuda_graphs: bool = False
    cudnn_benchmark: bool = True
    zero_init_last_bn: bool = False
    device: str = "auto"
    # Ranks beyond the devices share them: local rank r trains on device r % count (the path, not
    # a figure: a real run has a device a rank).
    share_devices: bool = False
    dist_backend: str = "auto"
    threads: int | None = None
    seed: int = 0
    memory_limit_bytes: int | None = None
    # > 0: a profiled run (rn50_model/op_profile.py) of this many iterations after the warm-up,
    # in place of the timed window; 0: the timed run.
    profile_iters: int = 0
    # Timed all-reduces of each message in the interconnect probe a multi-device run makes after
    # its timed window (rn50_model/interconnect.py); 0: no probe.
    interconnect_iters: int = 5

    def validate(self, device_type: str) -> None:
        """Raise ConfigError for the first setting that cannot run on `device_type`."""
        choices = {
            "precision": PRECISIONS,
            "data_backend": DATA_BACKENDS,
            "memory_format": MEMORY_FORMATS,
            "loss_scale": LOSS_SCALES,
            "optimizer_impl": OPTIMIZER_IMPLS,
            "device": DEVICES,
            "dist_backend": DIST_BACKENDS,
        }
        for name, allowed in choices.items():
            value = getattr(self, name)
            if value not in allowed:
                raise ConfigError(f"{name} {value!r} is not one of {', '.join(allowed)}")
        positive = ("batch_per_device", "image_size", "num_classes", "timed_iters")
        for name in positive:
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("warmup_iters", "profile_iters", "interconnect_iters"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be 0 or more, got {getattr(self, name)}")
        if self.image_size < 32:
            raise ConfigError(f"image_size {self.image_size} is too small for ResNet50's five "
                              "stride-2 stages; use 32 or more")
        if device_type == "cpu":
            if self.precision not in CPU_PRECISIONS:
                raise ConfigError(f"precision {self.precision!r} needs a CUDA device; on CPU use "
                                  f"{' or '.join(CPU_PRECISIONS)}")
            if self.data_backend == "dali-gpu":
                raise ConfigError("data backend 'dali-gpu' needs a CUDA device; on CPU use "
                                  "dali-cpu or synthetic")
            if self.cuda_graphs:
                raise ConfigError("cuda_graphs needs a CUDA device; drop it on CPU")
            if self.dist_backend == "nccl":
                raise ConfigError("dist_backend 'nccl' needs CUDA devices; on CPU use gloo")
        if self.cuda_graphs and self.precision == "amp" and self.optimizer_impl not in ("auto",
                                                                                       "fused"):
            raise ConfigError(f"cuda_graphs with amp needs the fused SGD: with "
                              f"{self.optimizer_impl} SGD, GradScaler reads on the host whether "
                              "the gradients overflowed (a sync a graph cannot hold); drop "
                              "optimizer_impl or use bf16")
        if self.cuda_graphs and self.data_backend != "synthetic":
            raise ConfigError(f"cuda_graphs cannot run with data backend "
                              f"{self.data_backend!r}: its loader works on the GPU from threads "
                              "of its own while a graph is captured, which CUDA forbids; use "
                              "the synthetic data backend with cuda_graphs")

    def resolved_memory_format(self, device_type: str) -> str:
        if self.memory_format != "auto":
            return self.memory_format
        # channels_last is NVIDIA's default on CUDA; on CPU it is measured faster here too
        # (oneDNN's blocked convolutions), so it is the default everywhere.
        return "channels_last"

    def learning_rate(self, world_size: int) -> float:
        return LR_PER_256_IMAGES * self.batch_per_device * world_size / 256

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json_file(cls, path: str | Path) -> "TrainConfig":
        return config_from_json_file(cls, path, "training config")


MLPERF_TARGET_TOP1 = 0.759   # MLPerf Training's ResNet50 v1.5 quality target on ImageNet


NVIDIA_EPOCHS = 90


NVIDIA_WARMUP_EPOCHS = 8


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
        return config_from_json_file(cls, path, "time-to-train config")


def config_from_json_file(config_class: type[C], path: str | Path, what: str) -> C:
    """A config dataclass from a JSON file of its fields; ConfigError in one line naming the file
    (`what` says whose) where it cannot be read, is not an object or has a field the class has
    not."""
    try:
        values = json.loads(Path(path).read_text())
    except (OSError, ValueError) as error:
        raise ConfigError(f"cannot read {what} {path}: {error}") from None
    known = {spec.name for spec in dataclasses.fields(config_class)}
    unknown = sorted(set(values) - known) if isinstance(values, dict) else ["(not an object)"]
    if unknown:
        raise ConfigError(f"{what} {path} has unknown settings: {', '.join(unknown)}; known: "
                          f"{', '.join(sorted(known))}")
    return config_class(**values)
