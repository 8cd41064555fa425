"""Training batches for the worker: synthetic, DALI (CPU or GPU decode) and torch DataLoader.

Every backend yields `(images, labels)` forever, already on the training device, images NCHW in
the run's memory format (NHWC storage for channels_last), labels int64. Real-data backends shard
the files by rank, so the ranks of a job read disjoint parts of each epoch.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from .config import ConfigError, TrainConfig
from .dataset import ensure_generated_dataset, find_broken_jpegs, resolve_data_dir

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

Batches = Iterator[tuple[torch.Tensor, torch.Tensor]]


@dataclass(frozen=True)
class Shard:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0


class BackendUnavailable(ConfigError):
    """The backend's library does not import here; the suite turns this into a skip."""


def input_dtype(config: TrainConfig) -> torch.dtype:
    # amp feeds fp16 images straight from the loader (as DALI's pipeline in NVIDIA's recipe does);
    # bf16 autocast casts at the first conv, so its input stays fp32 like fp32/tf32.
    return torch.float16 if config.precision == "amp" else torch.float32


def training_folder(config: TrainConfig) -> Path:
    if config.data_dir:
        return resolve_data_dir(config.data_dir)
    return ensure_generated_dataset()


def build_batches(config: TrainConfig, device: torch.device, shard: Shard,
                  threads: int = 1) -> Batches:
    memory_format = (torch.channels_last
                     if config.resolved_memory_format(device.type) == "channels_last"
                     else torch.contiguous_format)
    if config.data_backend == "synthetic":
        return synthetic_batches(config, device, memory_format)
    if config.data_backend in ("dali-cpu", "dali-gpu"):
        return dali_batches(config, training_folder(config), device, shard, threads)
    return torch_batches(config, training_folder(config), device, shard, threads, memory_format)


def synthetic_batches(config: TrainConfig, device: torch.device,
                      memory_format: torch.memory_format) -> Batches:
    """One device-resident random batch, reused: measures compute with no input pipeline."""
    generator = torch.Generator(device="cpu").manual_seed(config.seed)
    shape = (config.batch_per_device, 3, config.image_size, config.image_size)
    images = torch.randn(shape, generator=generator).to(
        device=device, dtype=input_dtype(config), memory_format=memory_format)
    labels = torch.randint(0, config.num_classes, (config.batch_per_device,),
                           generator=generator).to(device)
    while True:
        yield images, labels


def dali_pipeline(config: TrainConfig, folder: Path, shard: Shard, device_id: int | None,
                  threads: int, layout: str):
    """NVIDIA's training pipeline: sharded file reader, random-resized-crop decode, flip, normalize."""
    from nvidia.dali import fn, pipeline_def, types

    decode_on_gpu = config.data_backend == "dali-gpu"

    @pipeline_def(batch_size=config.batch_per_device, num_threads=max(threads, 1),
                  device_id=device_id, seed=config.seed + shard.rank)
    def pipeline():
        jpegs, labels = fn.readers.file(
            file_root=str(folder), shard_id=shard.rank, num_shards=shard.world_size,
            random_shuffle=True, pad_last_batch=True, name="Reader")
        images = fn.decoders.image_random_crop(
            jpegs, device="mixed" if decode_on_gpu else "cpu", output_type=types.RGB,
            random_aspect_ratio=[0.75, 4.0 / 3.0], random_area=[0.08, 1.0], num_attempts=100)
        images = fn.resize(images, resize_x=config.image_size, resize_y=config.image_size)
        images = fn.crop_mirror_normalize(
            images,
            dtype=types.FLOAT16 if input_dtype(config) == torch.float16 else types.FLOAT,
            output_layout=layout,
            mean=[255 * m for m in IMAGENET_MEAN], std=[255 * s for s in IMAGENET_STD],
            mirror=fn.random.coin_flip(probability=0.5))
        if decode_on_gpu:
            labels = labels.gpu()
        return images, labels

    return pipeline()


def dali_batches(config: TrainConfig, folder: Path, device: torch.device, shard: Shard,
                 threads: int) -> Batches:
    try:
        from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy
    except ImportError as error:
        raise BackendUnavailable(f"data backend {config.data_backend!r} needs NVIDIA DALI "
                                 f"(pip install nvidia-dali-cuda120): {error}") from None
    channels_last = config.resolved_memory_format(device.type) == "channels_last"
    device_id = device.index if config.data_backend == "dali-gpu" else None
    pipe = dali_pipeline(config, folder, shard, device_id, threads,
                         layout="HWC" if channels_last else "CHW")
    try:
        pipe.build()
    except RuntimeError as error:
        raise ConfigError(f"DALI could not start reading {folder}: {dali_error_summary(error)}") from None
    iterator = DALIGenericIterator([pipe], ["images", "labels"], reader_name="Reader",
                                   last_batch_policy=LastBatchPolicy.DROP, auto_reset=True)
    while True:
        try:
            for batch in iterator:
                images = batch[0]["images"]
                if channels_last:
                    # NHWC storage viewed as NCHW is exactly torch's channels_last layout.
                    images = images.permute(0, 3, 1, 2)
                labels = batch[0]["labels"].reshape(-1).long()
                yield (images.to(device, non_blocking=True),
                       labels.to(device, non_blocking=True))
        except RuntimeError as error:
            suspects = find_broken_jpegs(folder)
            named = "; ".join(suspects[:3]) if suspects else "no file looks broken by its bytes"
            raise ConfigError(f"DALI could not decode a file under {folder} "
                              f"({dali_error_summary(error)}): {named}; remove or replace "
                              "the broken files") from None


def torch_batches(config: TrainConfig, folder: Path, device: torch.device, shard: Shard,
                  threads: int, memory_format: torch.memory_format) -> Batches:
    try:
        from torchvision import datasets, transforms
    except Exception as error:  # a CUDA torchvision on CPU torch fails with RuntimeError too
        raise BackendUnavailable(
            f"data backend 'torch' needs torchvision, which does not import here "
            f"({first_line(error)}); use dali-cpu or synthetic") from None
    transform = transforms.Compose([
        transforms.RandomResizedCrop(config.image_size),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD),
    ])
    dataset = datasets.ImageFolder(str(folder), transform=transform)
    sampler = torch.utils.data.distributed.DistributedSampler(
        dataset, num_replicas=shard.world_size, rank=shard.rank, shuffle=True,
        seed=config.seed, drop_last=True)
    workers = config.data_workers if config.data_workers is not None else threads
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=config.batch_per_device, sampler=sampler, num_workers=workers,
        pin_memory=device.type == "cuda", drop_last=True, persistent_workers=workers > 0)
    if len(loader) == 0:
        raise ConfigError(f"data dir {folder} holds {len(dataset)} images, fewer than one "
                          f"batch of {config.batch_per_device} per rank")
    epoch = 0
    while True:
        sampler.set_epoch(epoch)
        for images, labels in loader:
            images = images.to(device, non_blocking=True).to(
                dtype=input_dtype(config), memory_format=memory_format)
            yield images, labels.to(device, non_blocking=True)
        epoch += 1


def first_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def dali_error_summary(error: BaseException) -> str:
    """DALI wraps the cause in a pipeline traceback; the cause is the line after 'encountered:'."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if "encountered:" in lines and lines.index("encountered:") + 1 < len(lines):
        return lines[lines.index("encountered:") + 1]
    causes = [line for line in lines if not line.startswith(("Critical error", "Current pipeline"))]
    return causes[0] if causes else first_line(error)
