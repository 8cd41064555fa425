"""The validation split of a time-to-train run: its folder, its pipeline (DALI or a torch
DataLoader, NVIDIA's resize-then-centre-crop), and top-1 and top-5 over every rank's shard."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from .config import ConfigError, ConvergenceConfig, TrainConfig

VAL_RESIZE_RATIO = 0.875     # NVIDIA's val pipeline: resize the shorter side to 256, crop 224


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
