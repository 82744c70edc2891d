"""VGG-16 (configuration D of Simonyan and Zisserman 2015), with or without batch norm.

The layout is torchvision's: `features` (3x3 convolutions with bias, optional batch norm, ReLU, max
pooling), an adaptive average pool to 7x7 (so inputs from 32x32 up work) and `classifier` (three fully
connected layers with dropout). Seed 004's `vgg16` profile is torchvision's `vgg16_bn`.

Try it: `python -c "from fabriclab.workload.models.vgg import build; print(sum(p.numel() for p in build().parameters()))"`.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from fabriclab.workload.models.common import check_num_classes

POOL = 0
# Configuration D (Simonyan and Zisserman 2015, Table 1): output channels of each 3x3 conv, POOL = max pool.
VGG16 = (64, 64, POOL, 128, 128, POOL, 256, 256, 256, POOL, 512, 512, 512, POOL, 512, 512, 512, POOL)


class VGG(nn.Module):
    """Convolutional `features`, 7x7 adaptive average pool, fully connected `classifier`."""

    def __init__(self, config: tuple[int, ...], batch_norm: bool, num_classes: int, dropout: float) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        in_channels = 3
        for channels in config:
            if channels == POOL:
                layers.append(nn.MaxPool2d(2, stride=2))
                continue
            layers.append(nn.Conv2d(in_channels, channels, 3, padding=1))
            if batch_norm:
                layers.append(nn.BatchNorm2d(channels))
            layers.append(nn.ReLU(inplace=True))
            in_channels = channels
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(7)
        self.classifier = nn.Sequential(
            nn.Linear(in_channels * 7 * 7, 4096), nn.ReLU(inplace=True), nn.Dropout(dropout),
            nn.Linear(4096, 4096), nn.ReLU(inplace=True), nn.Dropout(dropout),
            nn.Linear(4096, num_classes))

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


def build(*, batch_norm: bool = False, num_classes: int = 1000, dropout: float = 0.5) -> VGG:
    """VGG-16, with batch norm after every convolution when `batch_norm`."""
    check_num_classes(num_classes)
    return VGG(VGG16, batch_norm, num_classes, dropout)
