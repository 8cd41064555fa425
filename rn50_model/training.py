"""The training step of NVIDIA's ResNet50 v1.5 recipe, for every precision, on CUDA or CPU.

`Trainer` owns the model, the optimizer, the loss and the precision machinery; `step` is one
forward, backward and optimizer update. Precision is injected as an autocast context factory
(the timm way), so the step itself has no branches per precision.
"""
from __future__ import annotations

import contextlib
from functools import partial

import torch
from torch import nn

from .config import LABEL_SMOOTHING, MOMENTUM, WEIGHT_DECAY, TrainConfig
from .model import resnet50

AUTOCAST_DTYPES = {"amp": torch.float16, "bf16": torch.bfloat16}
# Eager steps a CUDA graph capture needs first: 3 on a side stream warm the caching allocator
# and cuDNN's autotuner; DDP needs 11 before capture (PyTorch's CUDA-graphs notes, "Whole-network
# capture" with DistributedDataParallel: its bucket rebuild and logging happen in early steps).
SIDE_STREAM_WARMUP_STEPS = 3
DDP_EAGER_STEPS_BEFORE_CAPTURE = 11


def configure_math(precision: str, device_type: str, cudnn_benchmark: bool) -> None:
    """TF32 is off only for `fp32`: that is what the fp32 rows of published tables mean.

    Set through the allow_tf32 flags, which every supported torch reads and which set the
    newer per-backend fp32_precision too. Set through fp32_precision alone (torch 2.9 and
    later), the allow_tf32 getters and torch.get_float32_matmul_precision() raise about mixing
    the two APIs, and torch.compile reads them (its graph cache key, its conv templates)."""
    if device_type != "cuda":
        return
    allow_tf32 = precision != "fp32"
    torch.backends.cuda.matmul.allow_tf32 = allow_tf32
    torch.backends.cudnn.allow_tf32 = allow_tf32
    torch.backends.cudnn.benchmark = cudnn_benchmark


def resolved_optimizer_impl(impl: str, device_type: str) -> str:
    if impl == "auto":
        return "fused" if device_type == "cuda" else "foreach"
    return impl


def side_stream_warmup_steps(eager_steps_done: int, distributed: bool) -> int:
    """Eager steps to run on the side stream before capture: at least 3, and for DDP enough
    that at least 11 eager steps have run in all, whatever the warm-up count was."""
    needed = DDP_EAGER_STEPS_BEFORE_CAPTURE - eager_steps_done if distributed else 0
    return max(SIDE_STREAM_WARMUP_STEPS, needed)


@contextlib.contextmanager
def side_stream(device: torch.device):
    """A new CUDA stream, current inside the block and ordered both ways against the stream
    current before it (NVIDIA's reference; PyTorch's CUDA-graphs notes on DDP): its work starts
    after what was queued before the block, and what is queued after the block waits for it.
    Without that, DDP's broadcast of rank 0's parameters could race the model's copy to the
    device and the first forward."""
    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream):
        yield stream
    torch.cuda.current_stream(device).wait_stream(stream)


def autocast_factory(precision: str, device_type: str):
    dtype = AUTOCAST_DTYPES.get(precision)
    if dtype is None:
        return contextlib.nullcontext
    return partial(torch.autocast, device_type=device_type, dtype=dtype)


def make_grad_scaler(config: TrainConfig) -> torch.amp.GradScaler | None:
    if config.precision != "amp":
        return None
    # Static loss scaling keeps the scale fixed (it still backs off on overflow), as in NVIDIA's
    # recipe; the two modes differ by a few percent in published throughput.
    growth_interval = 2000 if config.loss_scale == "dynamic" else 1_000_000_000
    init_scale = 2.0 ** 16 if config.loss_scale == "dynamic" else config.static_loss_scale
    return torch.amp.GradScaler("cuda", init_scale=init_scale, growth_interval=growth_interval)


def parameter_groups(model: nn.Module) -> list[dict]:
    """Weight decay on conv and linear weights only, not on BN parameters and biases."""
    decayed, not_decayed = [], []
    for module in model.modules():
        for name, parameter in module.named_parameters(recurse=False):
            if isinstance(module, nn.modules.batchnorm._BatchNorm) or name == "bias":
                not_decayed.append(parameter)
            else:
                decayed.append(parameter)
    return [{"params": decayed, "weight_decay": WEIGHT_DECAY},
            {"params": not_decayed, "weight_decay": 0.0}]


def build_optimizer(model: nn.Module, lr: float, impl: str, device_type: str) -> torch.optim.SGD:
    impl = resolved_optimizer_impl(impl, device_type)
    flags = {"fused": {"fused": True}, "foreach": {"foreach": True},
             "for-loop": {"foreach": False}}[impl]
    return torch.optim.SGD(parameter_groups(model), lr=lr, momentum=MOMENTUM, **flags)


def memory_format_of(name: str) -> torch.memory_format:
    return torch.channels_last if name == "channels_last" else torch.contiguous_format


class Trainer:
    """Model, optimizer and loss for one worker; `step(images, labels)` trains on one batch."""

    def __init__(self, config: TrainConfig, device: torch.device, world_size: int = 1,
                 distributed: bool = False) -> None:
        self.config = config
        self.device = device
        self.memory_format = memory_format_of(config.resolved_memory_format(device.type))
        configure_math(config.precision, device.type, config.cudnn_benchmark)
        torch.manual_seed(config.seed)
        model = resnet50(num_classes=config.num_classes,
                         zero_init_last_bn=config.zero_init_last_bn)
        model = model.to(device=device, memory_format=self.memory_format)
        self.model = model
        self.optimizer = build_optimizer(model, config.learning_rate(world_size),
                                         config.optimizer_impl, device.type)
        self.distributed = distributed
        self.eager_steps = 0
        if distributed:
            device_ids = [device.index] if device.type == "cuda" else None
            # A DDP model to be captured whole must be built on a side stream.
            building_stream = (side_stream(device) if config.cuda_graphs and device.type == "cuda"
                               else contextlib.nullcontext())
            with building_stream:
                model = nn.parallel.DistributedDataParallel(model, device_ids=device_ids,
                                                            gradient_as_bucket_view=True)
        if config.compile:
            model = torch.compile(model)
        self.train_model = model
        self.loss_fn = nn.CrossEntropyLoss(label_smoothing=LABEL_SMOOTHING)
        self.autocast = autocast_factory(config.precision, device.type)
        self.scaler = make_grad_scaler(config)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.model.train()

    def step(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """One training step; returns the loss as a detached device tensor (no host sync)."""
        if self.graph is not None:
            return self._replay(images, labels)
        self.optimizer.zero_grad(set_to_none=True)
        self.eager_steps += 1
        return self._forward_backward_update(images, labels)

    def _forward_backward_update(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        with self.autocast():
            loss = self.loss_fn(self.train_model(images), labels)
        if self.scaler is None:
            loss.backward()
            self.optimizer.step()
        else:
            # With fused SGD the scaler hands the optimizer its scale and found-inf tensors and
            # never reads them on the host, so this stays capturable in a CUDA graph.
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        return loss.detach()

    def capture_cuda_graph(self, images: torch.Tensor, labels: torch.Tensor) -> None:
        """Record one whole step (forward, backward, update) as a CUDA graph to replay.

        Eager steps run first on a side stream (so the optimizer's momentum buffers exist, cuDNN
        has chosen its algorithms and, with DDP, at least 11 eager steps have run); replays then
        read new batches from the captured input buffers.
        """
        self.static_images = images.clone()
        self.static_labels = labels.clone()
        with side_stream(self.device):
            for _ in range(side_stream_warmup_steps(self.eager_steps, self.distributed)):
                self.step(self.static_images, self.static_labels)
        graph = torch.cuda.CUDAGraph()
        self.optimizer.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):
            loss = self._forward_backward_update(self.static_images, self.static_labels)
        self.static_loss = loss
        self.graph = graph

    def _replay(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        if images.data_ptr() != self.static_images.data_ptr():
            self.static_images.copy_(images, non_blocking=True)
            self.static_labels.copy_(labels, non_blocking=True)
        self.graph.replay()
        return self.static_loss
