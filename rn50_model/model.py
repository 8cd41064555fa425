"""ResNet50 v1.5, written out here so the workload needs nothing beyond torch.

v1.5 differs from the original v1 only in where the stride sits: the first bottleneck of
stages 2-4 downsamples in its 3x3 conv, not its first 1x1 conv (He et al. 2016, as NVIDIA's
and torchvision's reference implementations define it). 25,557,032 parameters, 4.09 GMAC
forward at 224 px.
"""
from __future__ import annotations

import torch
from torch import nn

STAGE_BLOCKS = (3, 4, 6, 3)
STAGE_WIDTHS = (64, 128, 256, 512)
EXPANSION = 4


def conv_bn(in_channels: int, out_channels: int, kernel_size: int,
            stride: int = 1) -> nn.Sequential:
    conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride,
                     padding=kernel_size // 2, bias=False)
    return nn.Sequential(conv, nn.BatchNorm2d(out_channels))


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (carrying the stride: the v1.5 change), 1x1 expand, plus the shortcut."""

    def __init__(self, in_channels: int, width: int, stride: int) -> None:
        super().__init__()
        out_channels = width * EXPANSION
        self.reduce = conv_bn(in_channels, width, 1)
        self.spatial = conv_bn(width, width, 3, stride=stride)
        self.expand = conv_bn(width, out_channels, 1)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or in_channels != out_channels:
            self.downsample = conv_bn(in_channels, out_channels, 1, stride=stride)

    @property
    def last_bn(self) -> nn.BatchNorm2d:
        return self.expand[1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shortcut = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.reduce(x))
        out = self.relu(self.spatial(out))
        out = self.expand(out)
        return self.relu(out + shortcut)


class ResNet50(nn.Module):
    def __init__(self, num_classes: int = 1000, zero_init_last_bn: bool = False) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False),
            nn.BatchNorm2d(64),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, stride=2, padding=1),
        )
        stages = []
        in_channels = 64
        for index, (blocks, width) in enumerate(zip(STAGE_BLOCKS, STAGE_WIDTHS)):
            stride = 1 if index == 0 else 2
            layers = []
            for block in range(blocks):
                layers.append(Bottleneck(in_channels, width, stride if block == 0 else 1))
                in_channels = width * EXPANSION
            stages.append(nn.Sequential(*layers))
        self.stages = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(in_channels, num_classes)
        self._init_weights(zero_init_last_bn)

    def _init_weights(self, zero_init_last_bn: bool) -> None:
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_in", nonlinearity="relu")
            elif isinstance(module, nn.BatchNorm2d):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
        if zero_init_last_bn:
            # Each residual branch then starts as identity, which NVIDIA's recipe uses for
            # large-batch stability; it does not change the work done per step.
            for module in self.modules():
                if isinstance(module, Bottleneck):
                    nn.init.zeros_(module.last_bn.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stages(self.stem(x))
        return self.fc(torch.flatten(self.pool(x), 1))


def resnet50(num_classes: int = 1000, zero_init_last_bn: bool = False) -> ResNet50:
    return ResNet50(num_classes=num_classes, zero_init_last_bn=zero_init_last_bn)
