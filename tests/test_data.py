"""Data backends on real generated JPEGs: DALI's CPU pipeline, sharding, data-dir checks."""
import shutil
from pathlib import Path

import pytest
import torch
from PIL import Image

from rn50_model import ConfigError, TrainConfig
from rn50_model.data import BackendUnavailable, Shard, build_batches
from rn50_model.dataset import GeneratedDatasetSpec, ensure_generated_dataset, resolve_data_dir

CPU = torch.device("cpu")


def dali_config(folder: Path, **changes) -> TrainConfig:
    values = dict(batch_per_device=4, precision="fp32", image_size=48, num_classes=4,
                  data_backend="dali-cpu", data_dir=str(folder))
    values.update(changes)
    return TrainConfig(**values)


@pytest.mark.parametrize("memory_format", ["channels_last", "contiguous"])
def test_dali_cpu_pipeline_gives_normalized_batches_of_the_right_shape(jpeg_folder, memory_format):
    config = dali_config(jpeg_folder, memory_format=memory_format)
    batches = build_batches(config, CPU, Shard(), threads=2)
    for _ in range(12):  # 32 images, batches of 4: wraps into the next epochs
        images, labels = next(batches)
    assert images.shape == (4, 3, 48, 48) and images.dtype == torch.float32
    layout = torch.channels_last if memory_format == "channels_last" else torch.contiguous_format
    assert images.is_contiguous(memory_format=layout)
    assert labels.dtype == torch.int64 and labels.shape == (4,)
    assert set(labels.tolist()) <= {0, 1, 2, 3}
    # Normalized with ImageNet's mean and std: values centred near 0, spread near 1.
    assert -1.5 < images.mean().item() < 1.5 and 0.2 < images.std().item() < 2.0


def test_dali_gives_fp16_images_for_amp(jpeg_folder):
    images, _ = next(build_batches(dali_config(jpeg_folder, precision="amp"), CPU, Shard()))
    assert images.dtype == torch.float16


def test_two_ranks_read_disjoint_shards(tmp_path):
    # One image per class, so a label names a file.
    folder = ensure_generated_dataset(GeneratedDatasetSpec(num_classes=8, images_per_class=1),
                                      cache_root=tmp_path)
    config = dali_config(folder, num_classes=8)
    seen = []
    for rank in range(2):
        _, labels = next(build_batches(config, CPU, Shard(rank=rank, world_size=2)))
        seen.append(set(labels.tolist()))
    assert seen[0].isdisjoint(seen[1])
    assert seen[0] | seen[1] == set(range(8))


def test_synthetic_batch_stays_on_the_device_and_is_reused():
    config = TrainConfig(batch_per_device=2, precision="fp32", image_size=32)
    batches = build_batches(config, CPU, Shard())
    first, second = next(batches), next(batches)
    assert first[0] is second[0]
    assert first[0].shape == (2, 3, 32, 32) and first[0].is_contiguous(memory_format=torch.channels_last)


def test_generated_dataset_is_imagenet_shaped_and_deterministic(tmp_path):
    spec = GeneratedDatasetSpec(num_classes=2, images_per_class=2)
    first = ensure_generated_dataset(spec, cache_root=tmp_path / "a")
    second = ensure_generated_dataset(spec, cache_root=tmp_path / "b")
    files = sorted(first.rglob("*.JPEG"))
    assert [p.relative_to(first) for p in files] == \
        [p.relative_to(second) for p in sorted(second.rglob("*.JPEG"))]
    assert len(files) == 4 and len({p.parent.name for p in files}) == 2
    assert all(p.read_bytes() == (second / p.relative_to(first)).read_bytes() for p in files)
    with Image.open(files[0]) as image:
        assert image.size == (500, 375) and image.format == "JPEG"
    assert 10_000 < files[0].stat().st_size < 200_000
    # Asking again reuses the cached folder.
    assert ensure_generated_dataset(spec, cache_root=tmp_path / "a") == first


def test_data_dir_accepts_a_train_subfolder(jpeg_folder, tmp_path):
    shutil.copytree(jpeg_folder, tmp_path / "imagenet" / "train")
    assert resolve_data_dir(tmp_path / "imagenet") == tmp_path / "imagenet" / "train"
    assert resolve_data_dir(jpeg_folder) == jpeg_folder


def make_bad_folder(kind: str, root: Path) -> Path:
    if kind == "missing":
        return root / "nowhere"
    if kind == "a file":
        (root / "file").write_text("x")
        return root / "file"
    if kind == "empty":
        (root / "empty").mkdir()
        return root / "empty"
    if kind == "loose JPEGs":
        (root / "loose").mkdir()
        (root / "loose" / "a.JPEG").write_bytes(b"\xff\xd8")
        return root / "loose"
    (root / "classes" / "n0").mkdir(parents=True)
    (root / "classes" / "n0" / "notes.txt").write_text("x")
    return root / "classes"


@pytest.mark.parametrize("kind, words", [
    ("missing", "does not exist"),
    ("a file", "is not a folder"),
    ("empty", "has no class folders; the layout is <dir>/train/<class>/*.JPEG"),
    ("loose JPEGs", "has JPEGs but no class folders; the layout is <dir>/train/<class>/*.JPEG"),
    ("class folders without JPEGs", "has 1 class folder but no JPEG files; put *.JPEG "
                                    "files under <dir>/train/<class>/"),
])
def test_unusable_data_dir_is_one_line_naming_it(tmp_path, kind, words):
    folder = make_bad_folder(kind, tmp_path)
    with pytest.raises(ConfigError) as raised:
        resolve_data_dir(folder)
    assert words in str(raised.value)
    assert str(folder) in str(raised.value) and "\n" not in str(raised.value)


def test_corrupt_jpeg_is_named_in_one_line(jpeg_folder, tmp_path):
    folder = tmp_path / "broken"
    shutil.copytree(jpeg_folder, folder)
    victim = sorted(folder.rglob("*.JPEG"))[5]
    victim.write_bytes(b"this is not a JPEG at all" * 10)
    batches = build_batches(dali_config(folder), CPU, Shard())
    with pytest.raises(ConfigError) as raised:
        for _ in range(20):
            next(batches)
    message = str(raised.value)
    assert "\n" not in message and str(victim) in message and "not a JPEG" in message


def test_torch_backend_needs_torchvision(jpeg_folder):
    try:
        import torchvision  # noqa: F401
    except Exception:
        pass
    else:
        pytest.skip("torchvision imports here; the unavailable path cannot be shown")
    config = dali_config(jpeg_folder, data_backend="torch")
    with pytest.raises(BackendUnavailable, match="needs torchvision, which does not import"):
        next(build_batches(config, CPU, Shard()))


def test_torch_backend_loads_sharded_batches_where_torchvision_imports(jpeg_folder):
    pytest.importorskip("torchvision", reason="torchvision does not import here (CPU torch)",
                        exc_type=ImportError)
    config = dali_config(jpeg_folder, data_backend="torch", data_workers=0)
    images, labels = next(build_batches(config, CPU, Shard(rank=1, world_size=2)))
    assert images.shape == (4, 3, 48, 48) and labels.dtype == torch.int64
