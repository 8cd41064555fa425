"""ResNet50 v1.5 training workload: model, data, training step and the measuring worker.

Usable without pytest: `from rn50_model import resnet50`, or run the worker under torchrun
(`torchrun --standalone --nproc-per-node N -m rn50_model.worker --help`).
"""
from .config import ConfigError, TrainConfig

__all__ = ["ConfigError", "ResNet50", "TrainConfig", "resnet50"]


def __getattr__(name: str):
    # The model pulls in torch; the suite's pytest process imports this package for its config
    # alone and should not pay for torch at start-up.
    if name in ("resnet50", "ResNet50"):
        from . import model
        return getattr(model, name)
    raise AttributeError(f"module 'rn50_model' has no attribute {name!r}")
