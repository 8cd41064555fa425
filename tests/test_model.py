"""ResNet50 v1.5 identity: the numbers that make its throughput comparable to published figures."""
import math

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from rn50_model import resnet50
from rn50_model.model import Bottleneck


@pytest.fixture(scope="module")
def model():
    return resnet50()


def test_parameter_count_is_resnet50s(model):
    assert sum(p.numel() for p in model.parameters()) == 25_557_032


def test_forward_is_4_09_gmac_at_224_px(model):
    with FlopCounterMode(display=False) as counter:
        model(torch.randn(1, 3, 224, 224))
    # The counter reports FLOPs as 2 per multiply-accumulate.
    assert counter.get_total_flops() / 2 / 1e9 == pytest.approx(4.09, abs=0.005)


def test_stride_sits_on_the_3x3_conv_of_each_stages_first_block(model):
    strides = []
    for stage in model.stages:
        first = stage[0]
        assert isinstance(first, Bottleneck)
        assert first.reduce[0].stride == (1, 1)
        assert first.downsample is not None and isinstance(first.downsample[0], nn.Conv2d)
        assert first.downsample[0].kernel_size == (1, 1)
        assert first.downsample[0].stride == first.spatial[0].stride
        strides.append(first.spatial[0].stride)
        assert all(block.spatial[0].stride == (1, 1) for block in stage[1:])
    assert strides == [(1, 1), (2, 2), (2, 2), (2, 2)]


def test_output_is_logits_per_class_at_small_images():
    assert resnet50(num_classes=10)(torch.randn(2, 3, 64, 64)).shape == (2, 10)


def test_convolutions_use_kaiming_fan_in_init(model):
    conv = model.stages[3][0].spatial[0]  # 512 x 512 x 3 x 3: many samples
    fan_in = conv.in_channels * conv.kernel_size[0] * conv.kernel_size[1]
    assert conv.weight.std().item() == pytest.approx(math.sqrt(2 / fan_in), rel=0.02)


def test_last_bn_of_each_block_starts_at_zero_only_when_asked(model):
    blocks = [m for m in model.modules() if isinstance(m, Bottleneck)]
    assert len(blocks) == 16
    assert all(torch.all(b.last_bn.weight == 1) for b in blocks)
    zeroed = [m for m in resnet50(zero_init_last_bn=True).modules() if isinstance(m, Bottleneck)]
    assert all(torch.all(b.last_bn.weight == 0) for b in zeroed)
