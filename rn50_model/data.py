"""Training batches for the worker: synthetic, DALI (CPU or GPU decode) and torch DataLoader.

Every backend yields `(images, labels)` forever, already on the training device, images NCHW in
the run's memory format (NHWC storage for channels_last), labels int64. Real-data backends shard
the files by rank, so the ranks of a job read disjoint parts of each epoch.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import torch

from .config import ConfigError, TrainConfig
from .dataset import (check_enough_images, ensure_generated_dataset, find_broken_jpegs,
                      resolve_data_dir, spec_for_job)
from .failures import DataOutOfMemory, first_line, mentions_out_of_memory
from .packages import dali_distribution

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
# NVIDIA's nvJPEG buffer paddings in bytes (DeepLearningExamples' ConvNets dataloaders.py).
NVJPEG_DEVICE_PADDING = 211025920
NVJPEG_HOST_PADDING = 140544512

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


def training_folder(config: TrainConfig, shard: Shard) -> Path:
    if config.data_dir:
        return resolve_data_dir(config.data_dir)
    return ensure_generated_dataset(spec_for_job(shard.world_size, config.batch_per_device))


def build_batches(config: TrainConfig, device: torch.device, shard: Shard,
                  threads: int = 1) -> Batches:
    memory_format = (torch.channels_last
                     if config.resolved_memory_format(device.type) == "channels_last"
                     else torch.contiguous_format)
    if config.data_backend == "synthetic":
        return synthetic_batches(config, device, memory_format)
    if config.data_backend in ("dali-cpu", "dali-gpu"):
        return dali_batches(config, training_folder(config, shard), device, shard, threads)
    return torch_batches(config, training_folder(config, shard), device, shard, threads,
                         memory_format)


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


def decoder_options(decode_on_gpu: bool) -> dict:
    """The training decoder's backend and, for nvJPEG, NVIDIA's buffer sizes: padded to hold
    any full-size ImageNet image, nvJPEG never reallocates (a stall) inside the timed window.
    DALI reads the paddings on the "mixed" backend only."""
    if not decode_on_gpu:
        return {"device": "cpu"}
    return {"device": "mixed", "device_memory_padding": NVJPEG_DEVICE_PADDING,
            "host_memory_padding": NVJPEG_HOST_PADDING}


def dali_pipeline(config: TrainConfig, folder: Path, shard: Shard, device_id: int | None,
                  threads: int, layout: str):
    """NVIDIA's training pipeline: sharded file reader, random-resized-crop decode, flip, normalize.

    `device_id` None is a CPU-only pipeline (a host without CUDA). With a device, as in NVIDIA's
    reference: dali-gpu decodes with nvJPEG ("mixed") and resizes on the GPU; dali-cpu decodes
    and resizes on the CPU, then moves the images to the GPU (`.gpu()`) and normalizes there.
    Either way the batches come out as device tensors, with no host copy on the compute stream.
    """
    from nvidia.dali import fn, pipeline_def, types

    decode_on_gpu = config.data_backend == "dali-gpu"
    on_gpu = device_id is not None

    @pipeline_def(batch_size=config.batch_per_device, num_threads=max(threads, 1),
                  device_id=device_id, seed=config.seed + shard.rank)
    def pipeline():
        jpegs, labels = fn.readers.file(
            file_root=str(folder), shard_id=shard.rank, num_shards=shard.world_size,
            random_shuffle=True, pad_last_batch=True, name="Reader")
        images = fn.decoders.image_random_crop(
            jpegs, **decoder_options(decode_on_gpu), output_type=types.RGB,
            random_aspect_ratio=[0.75, 4.0 / 3.0], random_area=[0.08, 1.0], num_attempts=100)
        images = fn.resize(images, resize_x=config.image_size, resize_y=config.image_size,
                           antialias=False)
        if on_gpu and not decode_on_gpu:
            images = images.gpu()
        images = fn.crop_mirror_normalize(
            images,
            dtype=types.FLOAT16 if input_dtype(config) == torch.float16 else types.FLOAT,
            output_layout=layout,
            mean=[255 * m for m in IMAGENET_MEAN], std=[255 * s for s in IMAGENET_STD],
            mirror=fn.random.coin_flip(probability=0.5))
        if on_gpu:
            labels = labels.gpu()
        return images, labels

    return pipeline()


def dali_batches(config: TrainConfig, folder: Path, device: torch.device, shard: Shard,
                 threads: int) -> Batches:
    try:
        from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy
    except ImportError as error:
        raise BackendUnavailable(f"data backend {config.data_backend!r} needs NVIDIA DALI "
                                 f"(pip install {dali_distribution(torch.version.cuda)}): "
                                 f"{error}") from None
    channels_last = config.resolved_memory_format(device.type) == "channels_last"
    device_id = device.index if device.type == "cuda" else None
    pipe = dali_pipeline(config, folder, shard, device_id, threads,
                         layout="HWC" if channels_last else "CHW")
    try:
        pipe.build()
    except RuntimeError as error:
        raise dali_failure(error, folder, "could not start reading") from None
    # Checked here too for a worker started by hand; the suite checks before launching.
    check_enough_images(folder, pipe.reader_meta("Reader")["epoch_size"], shard.world_size,
                        config.batch_per_device)
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
                # Already on the device where the pipeline ends on the GPU: no copy then.
                yield (images.to(device, non_blocking=True),
                       labels.to(device, non_blocking=True))
        except RuntimeError as error:
            raise dali_failure(error, folder, "could not decode a file under") from None


def dali_failure(error: BaseException, folder: Path, doing: str) -> Exception:
    """DALI's error as one line: out of memory, a broken JPEG (named), or the cause as given."""
    summary = dali_error_summary(error)
    if mentions_out_of_memory(str(error)):
        return DataOutOfMemory(f"DALI ran out of memory reading {folder}: {summary}")
    suspects = find_broken_jpegs(folder)
    if suspects or "operator `nvidia.dali.fn.decoders." in str(error):
        named = "; ".join(suspects[:3]) if suspects else "no file looks broken by its bytes"
        return ConfigError(f"DALI {doing} {folder} ({summary}): {named}; remove or replace "
                           "the broken files")
    return ConfigError(f"DALI failed reading {folder}: {summary}")


def torch_batches(config: TrainConfig, folder: Path, device: torch.device, shard: Shard,
                  threads: int, memory_format: torch.memory_format) -> Batches:
    """NVIDIA's PyTorch loader: PIL crops collated as uint8 by the DataLoader's workers, moved
    to the device and normalized there, the next batch prefetched on a side stream."""
    try:
        from torchvision import datasets, transforms
    except Exception as error:  # a CUDA torchvision on CPU torch fails with RuntimeError too
        raise BackendUnavailable(
            f"data backend 'torch' needs torchvision, which does not import here "
            f"({first_line(error)}); use dali-cpu or synthetic") from None
    transform = transforms.Compose([transforms.RandomResizedCrop(config.image_size),
                                    transforms.RandomHorizontalFlip()])
    dataset = datasets.ImageFolder(str(folder), transform=transform)
    check_enough_images(folder, len(dataset), shard.world_size, config.batch_per_device)
    sampler = torch.utils.data.distributed.DistributedSampler(
        dataset, num_replicas=shard.world_size, rank=shard.rank, shuffle=True,
        seed=config.seed, drop_last=True)
    workers = config.data_workers if config.data_workers is not None else threads
    loader = uint8_loader(dataset, config.batch_per_device, workers, device, memory_format,
                          sampler=sampler, drop_last=True)

    def epochs():
        epoch = 0
        while True:
            sampler.set_epoch(epoch)
            yield from loader
            epoch += 1

    return normalized_on_device(epochs(), device, input_dtype(config))


def uint8_loader(dataset, batch_size: int, workers: int, device: torch.device,
                 memory_format: torch.memory_format, sampler=None,
                 drop_last: bool = False) -> torch.utils.data.DataLoader:
    """NVIDIA's DataLoader settings: batches bound for a GPU are collated into pinned memory
    (an asynchronous copy), and the workers live across epochs (no restart per pass)."""
    return torch.utils.data.DataLoader(
        dataset, batch_size=batch_size, sampler=sampler, num_workers=workers,
        pin_memory=device.type == "cuda", drop_last=drop_last, persistent_workers=workers > 0,
        collate_fn=partial(uint8_collate, memory_format=memory_format))


def uint8_collate(samples: list, memory_format: torch.memory_format = torch.channels_last):
    """(PIL image, label) pairs as one uint8 NCHW batch (a quarter of float32's bytes to copy)
    and int64 labels. Stacking HWC arrays gives channels_last storage without a copy."""
    import numpy as np
    images = torch.from_numpy(np.stack([np.asarray(image, dtype=np.uint8) for image, _ in samples]))
    images = images.permute(0, 3, 1, 2).contiguous(memory_format=memory_format)
    labels = torch.tensor([label for _, label in samples], dtype=torch.int64)
    return images, labels


def normalized_on_device(batches: Iterator[tuple[torch.Tensor, torch.Tensor]],
                         device: torch.device, dtype: torch.dtype) -> Batches:
    """uint8 host batches -> normalized `dtype` batches on `device`, the memory format kept.

    On CUDA the copy and normalization of batch k+1 run on a side stream while the model
    trains on batch k (as NVIDIA's PrefetchedWrapper does); the compute stream waits for it
    only when it needs it."""
    mean = torch.tensor([255 * m for m in IMAGENET_MEAN], device=device).view(1, 3, 1, 1)
    std = torch.tensor([255 * s for s in IMAGENET_STD], device=device).view(1, 3, 1, 1)

    def prepare(images: torch.Tensor, labels: torch.Tensor):
        images = images.to(device, non_blocking=True).to(dtype).sub_(mean).div_(std)
        return images, labels.to(device, non_blocking=True)

    if device.type != "cuda":
        for images, labels in batches:
            yield prepare(images, labels)
        return
    side_stream = torch.cuda.Stream(device)
    ready = None
    for images, labels in batches:
        with torch.cuda.stream(side_stream):
            upcoming = prepare(images, labels)
        if ready is not None:
            yield ready
        compute_stream = torch.cuda.current_stream(device)
        compute_stream.wait_stream(side_stream)
        for tensor in upcoming:  # allocated on the side stream, used on the compute stream
            tensor.record_stream(compute_stream)
        ready = upcoming
    if ready is not None:
        yield ready


def dali_error_summary(error: BaseException) -> str:
    """DALI wraps the cause in a pipeline traceback; the cause is the line after 'encountered:'."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if "encountered:" in lines and lines.index("encountered:") + 1 < len(lines):
        return lines[lines.index("encountered:") + 1]
    causes = [line for line in lines if not line.startswith(("Critical error", "Current pipeline"))]
    return causes[0] if causes else first_line(error)
