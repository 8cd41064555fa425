"""Data backends on real generated JPEGs: DALI's CPU pipeline, sharding, data-dir checks."""
import shutil
from pathlib import Path

import pytest
import torch
from PIL import Image

from rn50_model import ConfigError, TrainConfig
from rn50_model.data import (NVJPEG_DEVICE_PADDING, NVJPEG_HOST_PADDING, BackendUnavailable, Shard,
                             build_batches, dali_failure, dali_pipeline, normalized_on_device,
                             uint8_collate)
from rn50_model.dataset import (GeneratedDatasetSpec, check_enough_images, count_images,
                                ensure_generated_dataset, resolve_data_dir, spec_for_job)
from rn50_model.failures import DataOutOfMemory, is_out_of_memory
from rn50_model.validation import validation_pipeline

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
    assert first[0].shape == (2, 3, 32, 32)
    assert first[0].is_contiguous(memory_format=torch.channels_last)


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


@pytest.mark.parametrize("world_size, batch, images_per_class", [
    (1, 8, 32),      # the smoke cases: the 512-image base set
    (2, 64, 32),     # 2 x 64 x 3 = 384 fit in it
    (2, 300, 128),   # 1800 needed: 16 classes x 128
    (32, 256, 2048), # 4n8g at batch 256: 24,576 needed
])
def test_the_generated_set_is_sized_to_the_job(world_size, batch, images_per_class):
    spec = spec_for_job(world_size, batch)
    assert spec.images_per_class == images_per_class
    assert spec.num_classes * spec.images_per_class >= 3 * world_size * batch


def test_a_larger_generated_set_links_the_distinct_images(tmp_path):
    spec = GeneratedDatasetSpec(num_classes=2, images_per_class=40)
    folder = ensure_generated_dataset(spec, cache_root=tmp_path)
    assert count_images(folder) == 80
    first, linked = folder / "n00000001" / "n00000001_00000.JPEG", \
        folder / "n00000001" / "n00000001_00032.JPEG"
    assert first.stat().st_ino == linked.stat().st_ino  # a hard link: no extra disk
    distinct = {p.read_bytes() for p in (folder / "n00000001").iterdir()}
    assert len(distinct) == 32
    # Its base (the distinct images) is cached beside it and reused.
    spec = GeneratedDatasetSpec(num_classes=2, images_per_class=32)
    assert (tmp_path / spec.folder_name).is_dir()


def test_a_data_dir_smaller_than_a_batch_per_rank_is_one_line(jpeg_folder):
    check_enough_images(jpeg_folder, count_images(jpeg_folder), world_size=2, batch_per_device=16)
    with pytest.raises(ConfigError) as raised:
        check_enough_images(jpeg_folder, count_images(jpeg_folder), world_size=2,
                            batch_per_device=20)
    assert str(raised.value) == (f"data dir {jpeg_folder} holds 32 images, fewer than 40 (2 ranks "
                                 "x batch 20): every rank needs at least one whole batch; use a "
                                 "smaller batch or a larger data set")


def test_a_worker_started_by_hand_on_too_few_images_says_so(jpeg_folder):
    config = dali_config(jpeg_folder, batch_per_device=20)
    with pytest.raises(ConfigError, match="holds 32 images, fewer than 40"):
        next(build_batches(config, CPU, Shard(rank=1, world_size=2)))


def pipeline_devices(backend: str, device_id) -> dict:
    config = dali_config(Path("/nonexistent"), data_backend=backend)
    pipe = dali_pipeline(config, Path("/nonexistent"), Shard(), device_id, 1, "HWC")
    pipe._build_graph()  # DALI's Python graph: defined without a GPU, never run
    devices = {op.name.strip("_").rsplit("_", 1)[0]: op.outputs[0].device for op in pipe._ops}
    return devices, [node.device for node in pipe._graph_outputs]


def test_dali_cpu_on_a_gpu_host_is_nvidias_pipeline():
    devices, outputs = pipeline_devices("dali-cpu", device_id=0)
    # Decode and resize on the CPU, then .gpu(): normalize on the GPU, device tensors out.
    assert devices == {"Reader": "cpu", "ImageRandomCrop": "cpu", "Resize": "cpu",
                       "CoinFlip": "cpu", "CropMirrorNormalize": "gpu"}
    assert outputs == ["gpu", "gpu"]


def test_dali_gpu_decodes_with_nvjpeg_and_stays_on_the_gpu():
    devices, outputs = pipeline_devices("dali-gpu", device_id=0)
    assert devices["ImageRandomCrop"] == devices["Resize"] == "gpu"
    assert devices["CropMirrorNormalize"] == "gpu" and outputs == ["gpu", "gpu"]


def test_dali_cpu_on_a_cpu_host_stays_on_the_cpu():
    devices, outputs = pipeline_devices("dali-cpu", device_id=None)
    assert set(devices.values()) == {"cpu"} and outputs == ["cpu", "cpu"]


def operator_arguments(pipe) -> dict[str, dict[str, str]]:
    """Each operator's arguments as DALI's graph holds them, as text: {"Resize": {"antialias":
    "False", ...}, ...}; the graph is defined without a GPU and never run."""
    pipe._build_graph()
    found = {}
    for op in pipe._ops:
        lines = str(op.spec).split("Arguments:", 1)[1].splitlines()
        found[op.name.strip("_").rsplit("_", 1)[0]] = dict(
            line.strip().split(": ", 1) for line in lines if ": " in line)
    return found


def test_nvjpeg_decodes_into_nvidias_padded_buffers_and_the_cpu_decoder_has_none():
    nowhere = Path("/nonexistent")
    gpu = operator_arguments(dali_pipeline(dali_config(nowhere, data_backend="dali-gpu"),
                                           nowhere, Shard(), 0, 1, "HWC"))["ImageRandomCrop"]
    assert gpu["device"] == "mixed"
    assert gpu["device_memory_padding"] == str(NVJPEG_DEVICE_PADDING) == "211025920"
    assert gpu["host_memory_padding"] == str(NVJPEG_HOST_PADDING) == "140544512"
    for device_id in (0, None):  # DALI reads the paddings on "mixed" only: none on the CPU
        cpu = operator_arguments(dali_pipeline(dali_config(nowhere), nowhere, Shard(),
                                               device_id, 1, "HWC"))["ImageRandomCrop"]
        assert cpu["device"] == "cpu" and not {"device_memory_padding",
                                               "host_memory_padding"} & set(cpu)


@pytest.mark.parametrize("backend, device_id", [("dali-gpu", 0), ("dali-cpu", 0),
                                                ("dali-cpu", None)])
def test_the_validation_resize_has_no_antialias_as_nvidias(backend, device_id):
    nowhere = Path("/nonexistent")
    config = dali_config(nowhere, data_backend=backend, image_size=224)
    arguments = operator_arguments(validation_pipeline(config, nowhere, Shard(), device_id, 1,
                                                       "CHW"))
    assert arguments["Resize"]["antialias"] == "False"
    assert float(arguments["Resize"]["resize_shorter"]) == 256  # 224 / 0.875
    assert arguments["Image"]["device"] == ("mixed" if backend == "dali-gpu" else "cpu")


def dali_error(operator: str, device: str, cause: str) -> RuntimeError:
    """DALI's error text as 2.x raises it (the shape copied from a real decode failure)."""
    return RuntimeError(
        f"Critical error in pipeline:\nError in {device} operator `nvidia.dali.fn.{operator}`,\n"
        "which was used in the pipeline definition with the following traceback:\n\n"
        f'  File "rn50_model/data.py", line 96, in pipeline\n    ... = fn.{operator}(\n\n'
        f"encountered:\n\n{cause}\nCurrent pipeline object is no longer valid.")


DALI_OUT_OF_MEMORY = dali_error("decoders.image_random_crop", "MIXED",
                                "Can't allocate 6422528 bytes on device 0.")
DALI_DECODE_ERROR = dali_error("decoders.image_random_crop", "CPU", "nvImageCodec failure: '#4'")
DALI_OTHER_ERROR = dali_error("readers.file", "CPU",
                              'Assert on "file_list_entries.size() > 0" failed: No files found.')


def test_dali_out_of_memory_is_an_oom_not_broken_jpegs(jpeg_folder):
    failure = dali_failure(DALI_OUT_OF_MEMORY, jpeg_folder, "could not decode")
    assert isinstance(failure, DataOutOfMemory) and is_out_of_memory(failure)
    assert "Can't allocate 6422528 bytes on device 0." in str(failure)
    assert "broken" not in str(failure) and "\n" not in str(failure)
    assert is_out_of_memory(RuntimeError("CUDA allocation failed"))


def test_broken_jpegs_are_blamed_only_when_decoding_failed(jpeg_folder):
    decode = dali_failure(DALI_DECODE_ERROR, jpeg_folder, "could not decode a file under")
    assert "broken files" in str(decode) and "nvImageCodec failure: '#4'" in str(decode)
    other = dali_failure(DALI_OTHER_ERROR, jpeg_folder, "could not start reading")
    assert str(other) == (f"DALI failed reading {jpeg_folder}: Assert on "
                          '"file_list_entries.size() > 0" failed: No files found.')
    assert not is_out_of_memory(other)


def test_torch_loader_batches_are_uint8_until_normalized_on_the_device():
    rng = torch.Generator().manual_seed(0)
    pixels = [torch.randint(0, 256, (6, 5, 3), dtype=torch.uint8, generator=rng) for _ in range(2)]
    samples = [(Image.fromarray(p.numpy()), label) for p, label in zip(pixels, (3, 1))]
    images, labels = uint8_collate(samples)
    assert images.dtype == torch.uint8 and images.shape == (2, 3, 6, 5)
    assert images.is_contiguous(memory_format=torch.channels_last)
    assert labels.tolist() == [3, 1] and labels.dtype == torch.int64
    assert torch.equal(images[1].permute(1, 2, 0), pixels[1])

    batches = normalized_on_device(iter([(images, labels)] * 2), CPU, torch.float16)
    normalized, _ = next(batches)
    mean = torch.tensor([123.675, 116.28, 103.53]).view(1, 3, 1, 1)
    std = torch.tensor([58.395, 57.12, 57.375]).view(1, 3, 1, 1)
    assert normalized.dtype == torch.float16
    assert normalized.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(normalized.float(), (images.float() - mean) / std,
                               atol=1e-2, rtol=1e-2)
    assert len(list(batches)) == 1
