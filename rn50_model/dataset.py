"""ImageNet-style JPEG folders: checking a user's `--data-dir`, and generating one when none is
given.

The generated set has the layout and the JPEG sizes of ImageNet's training images (about
500x375, a few dozen KiB each), so the decode paths do real work; it is deterministic, built
once into a cache folder and renamed into place, so concurrent ranks and sessions share it.
It is sized to the job: every rank reads a few whole batches an epoch (`spec_for_job`). Beyond
the 512 distinct images of the base set, the extra files are hard links to them: decoding a
file costs the same whatever its name, and a 4n8g job at batch 256 needs no gigabytes of disk.
"""
from __future__ import annotations

import math
import os
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from .config import ConfigError

if TYPE_CHECKING:
    import numpy as np

JPEG_SUFFIXES = (".jpeg", ".jpg")
GENERATED_VERSION = 1
# Every rank of a job reads this many whole batches from each epoch of the generated set.
GENERATED_BATCHES_PER_RANK = 3


@dataclass(frozen=True)
class GeneratedDatasetSpec:
    num_classes: int = 16
    images_per_class: int = 32
    width: int = 500
    height: int = 375
    seed: int = 0

    @property
    def folder_name(self) -> str:
        return (f"synthetic-imagenet-v{GENERATED_VERSION}-{self.num_classes}c"
                f"x{self.images_per_class}-{self.width}x{self.height}-s{self.seed}")


BASE_SPEC = GeneratedDatasetSpec()


def spec_for_job(world_size: int, batch_per_device: int,
                 base: GeneratedDatasetSpec = BASE_SPEC) -> GeneratedDatasetSpec:
    """The generated set a job of `world_size` ranks at `batch_per_device` can train on: the
    base set where it is large enough, else one with more images per class (a power of two,
    so sessions with nearby batches share a cached set)."""
    needed = world_size * batch_per_device * GENERATED_BATCHES_PER_RANK
    if needed <= base.num_classes * base.images_per_class:
        return base
    per_class = 1 << math.ceil(math.log2(math.ceil(needed / base.num_classes)))
    return replace(base, images_per_class=per_class)


def count_images(folder: Path) -> int:
    """JPEG files in the class folders of `folder` (a resolved data dir)."""
    count = 0
    for class_dir in os.scandir(folder):
        if class_dir.is_dir():
            count += sum(1 for entry in os.scandir(class_dir.path)
                         if os.path.splitext(entry.name)[1].lower() in JPEG_SUFFIXES)
    return count


def check_enough_images(folder: Path | str, images: int, world_size: int,
                        batch_per_device: int) -> None:
    """Raise ConfigError where some rank's shard of `images` holds less than one batch."""
    needed = world_size * batch_per_device
    if images < needed:
        ranks = f"{world_size} ranks" if world_size > 1 else "1 rank"
        raise ConfigError(f"data dir {folder} holds {images} images, fewer than {needed} "
                          f"({ranks} x batch {batch_per_device}): every rank needs at least one "
                          "whole batch; use a smaller batch or a larger data set")


def default_cache_root() -> Path:
    configured = os.environ.get("RN50_DATA_CACHE")
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "rn50_perf"


def resolve_data_dir(data_dir: str | Path) -> Path:
    """The folder holding the class folders: `<dir>/train/<class>` or `<dir>/<class>`.

    Raises ConfigError, in one line naming the folder, where it cannot be used.
    """
    root = Path(data_dir)
    if not root.exists():
        raise ConfigError(f"data dir {root} does not exist; pass an ImageNet-style folder "
                          "(<dir>/train/<class>/*.JPEG) or leave --data-dir out to use generated "
                          "JPEGs")
    if not root.is_dir():
        raise ConfigError(f"data dir {root} is not a folder; pass the folder that holds the "
                          "class folders")
    if (root / "train").is_dir():
        root = root / "train"
    class_dirs = sorted(p for p in root.iterdir() if p.is_dir())
    if not class_dirs:
        loose = [p for p in root.iterdir() if p.suffix.lower() in JPEG_SUFFIXES]
        what = "JPEGs but no class folders" if loose else "no class folders"
        raise ConfigError(f"data dir {root} has {what}; the layout is "
                          "<dir>/train/<class>/*.JPEG (one folder per class)")
    if not any(p.suffix.lower() in JPEG_SUFFIXES for d in class_dirs for p in d.iterdir()):
        folders = "1 class folder" if len(class_dirs) == 1 else f"{len(class_dirs)} class folders"
        raise ConfigError(f"data dir {root} has {folders} but no JPEG files; put *.JPEG files "
                          "under <dir>/train/<class>/")
    return root


def find_broken_jpegs(folder: Path) -> list[str]:
    """Files under `folder` that cannot be whole JPEGs: no start-of-image or no end-of-image mark.

    Used only after a decoder failed, to name the files (DALI's error does not)."""
    broken = []
    for path in sorted(Path(folder).rglob("*")):
        if path.suffix.lower() not in JPEG_SUFFIXES or not path.is_file():
            continue
        with path.open("rb") as handle:
            head = handle.read(2)
            handle.seek(max(path.stat().st_size - 64, 0))
            tail = handle.read()
        if head != b"\xff\xd8":
            broken.append(f"{path} (not a JPEG)")
        elif b"\xff\xd9" not in tail:
            broken.append(f"{path} (truncated)")
    return broken


def ensure_generated_dataset(spec: GeneratedDatasetSpec = BASE_SPEC,
                             cache_root: Path | None = None) -> Path:
    """Return the generated data set's folder, generating it first if it is not cached."""
    cache_root = Path(cache_root) if cache_root is not None else default_cache_root()
    if (cache_root / spec.folder_name).is_dir():
        return cache_root / spec.folder_name
    distinct = min(spec.images_per_class, BASE_SPEC.images_per_class)
    source = (ensure_generated_dataset(replace(spec, images_per_class=distinct), cache_root)
              if spec.images_per_class > distinct else None)
    if source is None:
        return _cached_folder(cache_root, spec.folder_name,
                              lambda staging: _write_dataset(staging, spec))
    return _cached_folder(cache_root, spec.folder_name,
                          lambda staging: _link_dataset(staging, source, spec, distinct))


def _cached_folder(cache_root: Path, name: str, write) -> Path:
    """`cache_root/name`, written by `write(staging folder)` and renamed into place unless it is
    there already: concurrent ranks and sessions never see a half-written set."""
    target = cache_root / name
    if target.is_dir():
        return target
    cache_root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=cache_root))
    try:
        write(staging)
        try:
            staging.rename(target)
        except OSError:
            # Another process finished first; its copy is identical (the set is deterministic).
            if not target.is_dir():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _write_dataset(folder: Path, spec: GeneratedDatasetSpec) -> None:
    # numpy (as PIL) only where images are drawn: the suite's process imports this module for
    # its specs and checks, and numpy's import was half of the plugin's own.
    import numpy as np
    rng = np.random.default_rng(spec.seed)
    for label in range(spec.num_classes):
        class_dir = folder / f"n{label:08d}"
        class_dir.mkdir()
        hue = rng.uniform(0.3, 1, size=3)
        for index in range(spec.images_per_class):
            image = _natural_looking_image(rng, spec.height, spec.width, hue)
            image.save(class_dir / f"n{label:08d}_{index:05d}.JPEG", format="JPEG", quality=90)


def _link_dataset(folder: Path, source: Path, spec: GeneratedDatasetSpec, distinct: int) -> None:
    """Image k of a class is a hard link to image k mod `distinct` of the same class in `source`."""
    for label in range(spec.num_classes):
        class_dir = folder / f"n{label:08d}"
        class_dir.mkdir()
        for index in range(spec.images_per_class):
            name = f"n{label:08d}_{index:05d}.JPEG"
            original = source / class_dir.name / f"n{label:08d}_{index % distinct:05d}.JPEG"
            try:
                os.link(original, class_dir / name)
            except OSError:  # a file system without hard links: a copy costs disk, not time
                shutil.copyfile(original, class_dir / name)


def _natural_looking_image(rng: np.random.Generator, height: int, width: int, hue: np.ndarray):
    """Smooth gradients and blobs plus sensor-like noise: JPEG sizes close to real photos.

    The smooth part is drawn at 1/8 resolution and upscaled, which keeps generation to a few
    milliseconds an image.
    """
    import numpy as np
    from PIL import Image

    small_h, small_w = max(height // 8, 2), max(width // 8, 2)
    y, x = np.mgrid[0:small_h, 0:small_w].astype(np.float32)
    small = np.empty((small_h, small_w, 3), dtype=np.float32)
    for channel in range(3):
        fx, fy = rng.uniform(0.5, 4, size=2) * np.pi / np.array([small_w, small_h])
        small[..., channel] = 128 + 90 * hue[channel] * np.sin(fx * x + fy * y + rng.uniform(0, 7))
    for _ in range(rng.integers(3, 8)):
        cy, cx, radius = rng.uniform(0, small_h), rng.uniform(0, small_w), rng.uniform(2, 15)
        blob = np.exp(-((x - cx) ** 2 + (y - cy) ** 2) / (2 * radius ** 2))
        small += blob[..., None] * rng.uniform(-80, 80, size=3)
    smooth = Image.fromarray(np.clip(small, 0, 255).astype(np.uint8)).resize(
        (width, height), Image.BICUBIC)
    noise = rng.integers(-12, 13, size=(height, width, 3), dtype=np.int16)
    pixels = np.clip(np.asarray(smooth, dtype=np.int16) + noise, 0, 255).astype(np.uint8)
    return Image.fromarray(pixels)


@dataclass(frozen=True)
class LearnableDatasetSpec:
    """A small set a ResNet50 learns in a few epochs on a CPU, for time-to-train smoke cases.

    Each class has a colour of its own; every image is that colour shifted by a random tint
    (`tint` of the palette's spacing, so neighbouring classes overlap a little and top-1 stays
    below 100%) over class-independent texture and noise. Colour survives random crops and
    flips, so the training pipeline's augmentation keeps the signal. `train/` and `val/`
    splits, ImageNet's layout.
    """
    num_classes: int = 10
    train_per_class: int = 64
    val_per_class: int = 20
    side: int = 48
    tint: float = 0.35
    seed: int = 0

    @property
    def folder_name(self) -> str:
        return (f"learnable-v{GENERATED_VERSION}-{self.num_classes}c-{self.train_per_class}"
                f"+{self.val_per_class}-{self.side}px-t{self.tint:g}-s{self.seed}")


def ensure_learnable_dataset(spec: LearnableDatasetSpec = LearnableDatasetSpec(),
                             cache_root: Path | None = None) -> Path:
    """The learnable set's folder (holding `train/` and `val/`), generated first if not cached."""
    cache_root = Path(cache_root) if cache_root is not None else default_cache_root()
    return _cached_folder(cache_root, spec.folder_name,
                          lambda staging: _write_learnable(staging, spec))


def _write_learnable(folder: Path, spec: LearnableDatasetSpec) -> None:
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(spec.seed)
    # Hues evenly around the colour wheel at two brightness levels: classes differ in colour.
    palette = []
    for label in range(spec.num_classes):
        angle = 2 * np.pi * label / spec.num_classes
        level = 150 if label % 2 else 110
        palette.append(level + 90 * np.cos(angle + np.array([0, 2 * np.pi / 3, 4 * np.pi / 3])))
    spacing = 2 * np.pi * 90 / spec.num_classes  # distance between neighbouring hues
    for split, per_class in (("train", spec.train_per_class), ("val", spec.val_per_class)):
        for label in range(spec.num_classes):
            class_dir = folder / split / f"c{label:04d}"
            class_dir.mkdir(parents=True)
            for index in range(per_class):
                colour = palette[label] + rng.normal(0, spec.tint * spacing, size=3)
                texture = rng.normal(0, 1, size=(spec.side // 8 + 1, spec.side // 8 + 1, 1))
                texture = np.kron(texture, np.ones((8, 8, 1)))[:spec.side, :spec.side]
                noise = rng.normal(0, 12, size=(spec.side, spec.side, 3))
                pixels = np.clip(colour + 25 * texture + noise, 0, 255).astype(np.uint8)
                Image.fromarray(pixels).save(class_dir / f"{split}_{label:04d}_{index:05d}.JPEG",
                                             format="JPEG", quality=90)
