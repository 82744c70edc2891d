"""AlexNet as torchvision builds it: the single-tower variant of Krizhevsky's "One weird trick for
parallelizing convolutional neural networks" (2014), 64-192-384-256-256 channels, not the two-GPU
original of 2012 (96-256-384-384-256 channels).

Try it: `python -c "from fabriclab.workload.models.alexnet import build; print(sum(p.numel() for p in build().parameters()))"`.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from fabriclab.workload.models.common import check_num_classes


class AlexNet(nn.Module):
    """Five convolutions, a 6x6 adaptive average pool, three fully connected layers."""

    def __init__(self, num_classes: int, dropout: float) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 11, stride=4, padding=2), nn.ReLU(inplace=True), nn.MaxPool2d(3, stride=2),
            nn.Conv2d(64, 192, 5, padding=2), nn.ReLU(inplace=True), nn.MaxPool2d(3, stride=2),
            nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(256, 256, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(3, stride=2))
        self.avgpool = nn.AdaptiveAvgPool2d(6)
        self.classifier = nn.Sequential(
            nn.Dropout(dropout), nn.Linear(256 * 6 * 6, 4096), nn.ReLU(inplace=True),
            nn.Dropout(dropout), nn.Linear(4096, 4096), nn.ReLU(inplace=True),
            nn.Linear(4096, num_classes))

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


def build(*, num_classes: int = 1000, dropout: float = 0.5) -> AlexNet:
    """AlexNet (torchvision layout)."""
    check_num_classes(num_classes)
    return AlexNet(num_classes, dropout)
