"""ResNet-50 and ResNet-101 with bottleneck blocks, v1 and v1.5.

v1 (He et al. 2015, "Deep Residual Learning for Image Recognition", and its Caffe release) puts a
block's stride on the first 1x1 convolution; v1.5 (torchvision's `resnet50`, NVIDIA's and MLPerf's
"ResNet-50 v1.5") puts it on the 3x3 convolution, which costs more FLOPs but not a single parameter.
Parameter names follow torchvision (`layer1.0.conv1.weight`, `layer2.0.downsample.0.weight`).

Try it: `python -c "from fabriclab.workload.models.resnet import build; print(sum(p.numel() for p in build(depth=50).parameters()))"`.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from fabriclab.workload.models.common import check_num_classes

# Blocks per stage (He et al. 2015, Table 1).
STAGES = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3)}
EXPANSION = 4  # a bottleneck's output has 4x its width (Table 1: 64 -> 256, ...)


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3, 1x1 expand; the shortcut is projected when shape or stride changes."""

    def __init__(self, in_channels: int, width: int, stride: int, stride_on_3x3: bool) -> None:
        super().__init__()
        out_channels = width * EXPANSION
        self.conv1 = nn.Conv2d(in_channels, width, 1, stride=1 if stride_on_3x3 else stride, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu1 = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride if stride_on_3x3 else 1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.relu2 = nn.ReLU(inplace=True)
        self.conv3 = nn.Conv2d(width, out_channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)
        self.downsample = None
        if stride != 1 or in_channels != out_channels:
            self.downsample = nn.Sequential(nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
                                            nn.BatchNorm2d(out_channels))
        self.relu3 = nn.ReLU(inplace=True)

    def forward(self, x: Tensor) -> Tensor:
        out = self.relu1(self.bn1(self.conv1(x)))
        out = self.relu2(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        identity = x if self.downsample is None else self.downsample(x)
        # Out of place: a module output modified in place breaks the profiler's backward hooks.
        return self.relu3(out + identity)


class ResNet(nn.Module):
    """7x7 stem, four stages of bottlenecks, global average pooling, one fully connected layer."""

    def __init__(self, depth: int, stride_on_3x3: bool, num_classes: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        in_channels = 64
        for index, (num_blocks, width) in enumerate(zip(STAGES[depth], (64, 128, 256, 512))):
            blocks = []
            for block in range(num_blocks):
                stride = 2 if block == 0 and index > 0 else 1
                blocks.append(Bottleneck(in_channels, width, stride, stride_on_3x3))
                in_channels = width * EXPANSION
            setattr(self, f"layer{index + 1}", nn.Sequential(*blocks))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(in_channels, num_classes)
        for module in self.modules():
            # He initialisation (He et al. 2015, "Delving Deep into Rectifiers"), as torchvision does.
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: Tensor) -> Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def build(*, depth: int = 50, stride_on_3x3: bool = False, num_classes: int = 1000) -> ResNet:
    """ResNet-`depth` (50 or 101); `stride_on_3x3=True` gives v1.5."""
    if depth not in STAGES:
        raise ValueError(f"ResNet depth {depth} is not in the zoo; use one of {sorted(STAGES)}")
    check_num_classes(num_classes)
    return ResNet(depth, stride_on_3x3, num_classes)
