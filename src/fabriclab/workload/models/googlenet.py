"""GoogLeNet (Inception v1, Szegedy et al. 2015, "Going Deeper with Convolutions"), torchvision layout.

As in torchvision, every convolution has batch norm (the 2015 paper had none) and the "5x5" branch
uses a 3x3 kernel (a known quirk of the TensorFlow port torchvision's weights come from, see
github.com/pytorch/vision/issues/906); both are needed to match torchvision's parameter count.
The two auxiliary classifiers run in training mode only; the paper weights their losses by 0.3.

Try it: `python -c "from fabriclab.workload.models.googlenet import build; print(sum(p.numel() for p in build().parameters()))"`.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from fabriclab.workload.models.common import ConvBNReLU, check_num_classes

# (in, 1x1, 3x3 reduce, 3x3, 5x5 reduce, 5x5, pool proj): Szegedy et al. 2015, Table 1.
INCEPTION = {
    "3a": (192, 64, 96, 128, 16, 32, 32), "3b": (256, 128, 128, 192, 32, 96, 64),
    "4a": (480, 192, 96, 208, 16, 48, 64), "4b": (512, 160, 112, 224, 24, 64, 64),
    "4c": (512, 128, 128, 256, 24, 64, 64), "4d": (512, 112, 144, 288, 32, 64, 64),
    "4e": (528, 256, 160, 320, 32, 128, 128), "5a": (832, 256, 160, 320, 32, 128, 128),
    "5b": (832, 384, 192, 384, 48, 128, 128),
}


class Inception(nn.Module):
    """Four parallel branches concatenated along channels."""

    def __init__(self, in_ch: int, ch1x1: int, ch3x3red: int, ch3x3: int, ch5x5red: int, ch5x5: int,
                 pool_proj: int) -> None:
        super().__init__()
        self.branch1 = ConvBNReLU(in_ch, ch1x1, kernel_size=1)
        self.branch2 = nn.Sequential(ConvBNReLU(in_ch, ch3x3red, kernel_size=1),
                                     ConvBNReLU(ch3x3red, ch3x3, kernel_size=3, padding=1))
        self.branch3 = nn.Sequential(ConvBNReLU(in_ch, ch5x5red, kernel_size=1),
                                     ConvBNReLU(ch5x5red, ch5x5, kernel_size=3, padding=1))
        self.branch4 = nn.Sequential(nn.MaxPool2d(3, stride=1, padding=1, ceil_mode=True),
                                     ConvBNReLU(in_ch, pool_proj, kernel_size=1))

    def forward(self, x: Tensor) -> Tensor:
        return torch.cat([self.branch1(x), self.branch2(x), self.branch3(x), self.branch4(x)], 1)


class InceptionAux(nn.Module):
    """Auxiliary classifier: 4x4 average pool, 1x1 conv to 128, two fully connected layers."""

    def __init__(self, in_ch: int, num_classes: int) -> None:
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(4)
        self.conv = ConvBNReLU(in_ch, 128, kernel_size=1)
        self.fc1 = nn.Linear(128 * 4 * 4, 1024)
        self.relu = nn.ReLU(inplace=True)
        self.dropout = nn.Dropout(0.7)  # Szegedy et al. 2015, section 5: 70% dropout in the aux heads
        self.fc2 = nn.Linear(1024, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        x = torch.flatten(self.conv(self.pool(x)), 1)
        return self.fc2(self.dropout(self.relu(self.fc1(x))))


class GoogLeNet(nn.Module):
    """Stem, nine inception modules, global average pooling; auxiliary heads after 4a and 4d."""

    def __init__(self, num_classes: int, aux_logits: bool, dropout: float) -> None:
        super().__init__()
        self.conv1 = ConvBNReLU(3, 64, kernel_size=7, stride=2, padding=3)
        self.maxpool1 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self.conv2 = ConvBNReLU(64, 64, kernel_size=1)
        self.conv3 = ConvBNReLU(64, 192, kernel_size=3, padding=1)
        self.maxpool2 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        for key in ("3a", "3b"):
            setattr(self, f"inception{key}", Inception(*INCEPTION[key]))
        self.maxpool3 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        for key in ("4a", "4b", "4c", "4d", "4e"):
            setattr(self, f"inception{key}", Inception(*INCEPTION[key]))
        self.maxpool4 = nn.MaxPool2d(2, stride=2, ceil_mode=True)
        for key in ("5a", "5b"):
            setattr(self, f"inception{key}", Inception(*INCEPTION[key]))
        self.aux1 = InceptionAux(512, num_classes) if aux_logits else None
        self.aux2 = InceptionAux(528, num_classes) if aux_logits else None
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(1024, num_classes)

    def forward(self, x: Tensor) -> Tensor | tuple[Tensor, Tensor, Tensor]:
        """Logits; in training mode with auxiliary heads, (logits, aux1 logits, aux2 logits)."""
        x = self.maxpool1(self.conv1(x))
        x = self.maxpool2(self.conv3(self.conv2(x)))
        x = self.maxpool3(self.inception3b(self.inception3a(x)))
        x = self.inception4a(x)
        aux = self.aux1 is not None and self.training
        aux1 = self.aux1(x) if aux else None
        x = self.inception4d(self.inception4c(self.inception4b(x)))
        aux2 = self.aux2(x) if aux else None
        x = self.maxpool4(self.inception4e(x))
        x = self.inception5b(self.inception5a(x))
        x = self.fc(self.dropout(torch.flatten(self.avgpool(x), 1)))
        return (x, aux1, aux2) if aux else x


def build(*, num_classes: int = 1000, aux_logits: bool = False, dropout: float = 0.2) -> GoogLeNet:
    """GoogLeNet; `aux_logits=True` adds the two auxiliary classifiers (torchvision's default)."""
    check_num_classes(num_classes)
    return GoogLeNet(num_classes, aux_logits, dropout)
