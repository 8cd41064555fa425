"""The training step follows NVIDIA's recipe and trains, for each precision the CPU can run."""
import contextlib

import pytest
import torch
from torch import nn

from rn50_model import ConfigError, TrainConfig
from rn50_model.config import LABEL_SMOOTHING, MOMENTUM, WEIGHT_DECAY
from rn50_model.training import (DDP_EAGER_STEPS_BEFORE_CAPTURE, Trainer, autocast_factory,
                                 configure_math, make_grad_scaler, side_stream,
                                 side_stream_warmup_steps)

CPU = torch.device("cpu")


def small_config(**changes) -> TrainConfig:
    values = dict(batch_per_device=4, precision="fp32", image_size=32, num_classes=10)
    values.update(changes)
    return TrainConfig(**values)


def fixed_batch(config: TrainConfig, trainer: Trainer):
    generator = torch.Generator().manual_seed(1)
    images = torch.randn(config.batch_per_device, 3, config.image_size, config.image_size,
                         generator=generator).to(memory_format=trainer.memory_format)
    labels = torch.randint(0, config.num_classes, (config.batch_per_device,), generator=generator)
    return images, labels


@pytest.mark.slow
def test_a_few_steps_on_a_fixed_batch_lower_the_loss():
    config = small_config()
    trainer = Trainer(config, CPU)
    batch = fixed_batch(config, trainer)
    losses = [trainer.step(*batch).item() for _ in range(6)]
    assert losses[-1] < losses[0] * 0.8, losses


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.slow
def test_each_cpu_precision_trains(precision):
    config = small_config(precision=precision)
    config.validate("cpu")
    trainer = Trainer(config, CPU)
    images, labels = fixed_batch(config, trainer)
    with trainer.autocast():
        logits = trainer.train_model(images)
    assert logits.dtype == {"fp32": torch.float32, "bf16": torch.bfloat16}[precision]
    losses = [trainer.step(images, labels) for _ in range(3)]
    assert all(torch.isfinite(loss) for loss in losses)
    assert make_grad_scaler(config) is None


@pytest.mark.parametrize("precision", ["amp", "tf32"])
def test_cuda_only_precisions_are_a_one_line_error_on_cpu(precision):
    with pytest.raises(ConfigError) as raised:
        small_config(precision=precision).validate("cpu")
    message = str(raised.value)
    assert "\n" not in message and precision in message and "fp32 or bf16" in message


def test_autocast_is_a_plain_context_for_fp32_and_tf32():
    assert autocast_factory("fp32", "cuda")().__class__.__name__ == "nullcontext"
    assert autocast_factory("tf32", "cuda")().__class__.__name__ == "nullcontext"


def test_optimizer_is_nvidias_recipe():
    config = small_config(batch_per_device=64)
    trainer = Trainer(config, CPU, world_size=4)
    decayed, not_decayed = trainer.optimizer.param_groups
    assert decayed["weight_decay"] == WEIGHT_DECAY == 3.0517578125e-05
    assert not_decayed["weight_decay"] == 0.0
    # Conv weights (53) and the fc weight are decayed; BN weights and biases and the fc bias not.
    assert len(decayed["params"]) == 54
    norm_and_bias = [p for m in trainer.model.modules()
                     for n, p in m.named_parameters(recurse=False)
                     if isinstance(m, nn.BatchNorm2d) or n == "bias"]
    assert {id(p) for p in not_decayed["params"]} == {id(p) for p in norm_and_bias}
    assert decayed["momentum"] == MOMENTUM == 0.875
    assert decayed["lr"] == pytest.approx(0.256)  # 64 x 4 = 256 images
    assert trainer.loss_fn.label_smoothing == LABEL_SMOOTHING == 0.1


def test_learning_rate_scales_linearly_with_the_global_batch():
    assert small_config(batch_per_device=256).learning_rate(8) == pytest.approx(2.048)
    assert small_config(batch_per_device=32).learning_rate(1) == pytest.approx(0.032)


def test_channels_last_is_the_default_and_contiguous_selectable():
    assert Trainer(small_config(), CPU).memory_format == torch.channels_last
    trainer = Trainer(small_config(memory_format="contiguous"), CPU)
    assert trainer.memory_format == torch.contiguous_format
    assert trainer.model.stem[0].weight.is_contiguous()


@pytest.mark.parametrize("changes, words", [
    ({"precision": "fp16"}, "precision 'fp16'"),
    ({"data_backend": "dali-gpu"}, "needs a CUDA device"),
    ({"cuda_graphs": True}, "cuda_graphs needs a CUDA device"),
    ({"image_size": 16}, "too small"),
    ({"batch_per_device": 0}, "batch_per_device must be at least 1"),
])
def test_bad_settings_are_one_line_errors(changes, words):
    with pytest.raises(ConfigError, match=words) as raised:
        small_config(**changes).validate("cpu")
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("impl", ["foreach", "for-loop"])
def test_cuda_graphs_with_amp_need_the_fused_sgd(impl):
    with pytest.raises(ConfigError, match="fused SGD") as raised:
        small_config(precision="amp", cuda_graphs=True, optimizer_impl=impl).validate("cuda")
    assert "GradScaler" in str(raised.value) and "\n" not in str(raised.value)
    # Fused SGD takes the scaler's found-inf flag on the device: capturable.
    small_config(precision="amp", cuda_graphs=True, optimizer_impl="fused").validate("cuda")
    small_config(precision="amp", cuda_graphs=True).validate("cuda")  # auto is fused on CUDA


@pytest.mark.parametrize("backend", ["dali-gpu", "dali-cpu", "torch"])
def test_cuda_graphs_refuse_loaders_that_work_on_the_gpu_from_their_own_threads(backend):
    with pytest.raises(ConfigError, match="use the synthetic data backend") as raised:
        small_config(precision="bf16", cuda_graphs=True, data_backend=backend).validate("cuda")
    assert backend in str(raised.value) and "\n" not in str(raised.value)
    small_config(precision="bf16", cuda_graphs=True).validate("cuda")


@pytest.mark.parametrize("eager_done, distributed, side_stream_steps", [
    (20, False, 3), (0, False, 3),      # one GPU: the side stream's own 3 steps
    (20, True, 3), (8, True, 3),        # DDP after enough warm-up: still 3
    (2, True, 9), (0, True, 11),        # DDP with --perf-set warmup=2 or 0: up to 11 in all
])
def test_eager_steps_before_capture_reach_ddps_minimum(eager_done, distributed, side_stream_steps):
    assert side_stream_warmup_steps(eager_done, distributed) == side_stream_steps
    if distributed:
        assert eager_done + side_stream_steps >= DDP_EAGER_STEPS_BEFORE_CAPTURE == 11


def test_the_trainer_counts_its_eager_steps():
    config = small_config()
    trainer = Trainer(config, CPU)
    batch = fixed_batch(config, trainer)
    for _ in range(2):
        trainer.step(*batch)
    assert trainer.eager_steps == 2


@pytest.fixture
def math_flags_restored():
    """The process-wide math flags as they were, after a test that sets them."""
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
             torch.backends.cudnn.benchmark)
    yield
    (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
     torch.backends.cudnn.benchmark) = saved


@pytest.mark.parametrize("precision, tf32", [("fp32", False), ("tf32", True), ("amp", True),
                                             ("bf16", True)])
def test_tf32_settings_read_back_through_the_old_and_the_new_api(precision, tf32,
                                                                 math_flags_restored):
    """torch.compile reads the allow_tf32 getters and torch.get_float32_matmul_precision(); set
    through fp32_precision alone they raise about mixing the APIs. The flags are process-wide,
    settable without a GPU."""
    configure_math(precision, "cuda", cudnn_benchmark=True)
    assert torch.backends.cuda.matmul.allow_tf32 is tf32
    assert torch.backends.cudnn.allow_tf32 is tf32
    assert torch.get_float32_matmul_precision() == ("high" if tf32 else "highest")
    assert torch.backends.cudnn.benchmark
    if hasattr(torch.backends.cuda.matmul, "fp32_precision"):  # torch 2.9 and later
        assert torch.backends.cuda.matmul.fp32_precision == ("tf32" if tf32 else "ieee")
        assert (torch.backends.cudnn.conv.fp32_precision == "tf32") is tf32


class RecordingStreams:
    """Stand-ins for torch.cuda's streams (no GPU here) that note every ordering call."""

    def __init__(self, monkeypatch) -> None:
        self.calls = []
        self.current = self.Stream("default", self.calls)
        monkeypatch.setattr(torch.cuda, "Stream",
                            lambda device=None: self.Stream("side", self.calls))
        monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: self.current)
        monkeypatch.setattr(torch.cuda, "stream", self.made_current)

    class Stream:
        def __init__(self, name: str, calls: list) -> None:
            self.name, self.calls = name, calls

        def wait_stream(self, other) -> None:
            self.calls.append(f"{self.name} waits for {other.name}")

    @contextlib.contextmanager
    def made_current(self, stream):
        before, self.current = self.current, stream
        yield
        self.current = before


def test_work_on_a_side_stream_is_ordered_both_ways_against_the_current_stream(monkeypatch):
    """As NVIDIA's reference builds DDP for CUDA graphs: the side stream waits for the model's
    copy to the device, the default stream for DDP's parameter broadcast."""
    streams = RecordingStreams(monkeypatch)
    with side_stream(torch.device("cuda", 0)):
        streams.calls.append(f"DDP built on {streams.current.name}")
    assert streams.calls == ["side waits for default", "DDP built on side",
                             "default waits for side"]
