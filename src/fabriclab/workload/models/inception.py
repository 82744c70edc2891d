"""Inception v3 (Szegedy et al. 2016, "Rethinking the Inception Architecture"), torchvision layout.

299x299 input; module and parameter names follow torchvision (`Mixed_5b.branch1x1.conv.weight`,
`AuxLogits.conv1.bn.bias`), batch norm with eps 0.001 after every bias-free convolution. The auxiliary
classifier on Mixed_6e runs in training mode only; its loss is weighted by 0.4 in training (the weight
of TensorFlow's reference Inception v3, `research/inception/inception/inception_model.py` in
tensorflow/models).

Try it: `python -c "from fabriclab.workload.models.inception import build; print(sum(p.numel() for p in build().parameters()))"`.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from fabriclab.workload.models.common import ConvBNReLU as Conv
from fabriclab.workload.models.common import check_num_classes


def _same_pool() -> nn.AvgPool2d:
    return nn.AvgPool2d(3, stride=1, padding=1)


class InceptionA(nn.Module):
    """35x35 module: 1x1, 5x5, double 3x3 and pooled 1x1 branches (the paper's figure 5)."""

    def __init__(self, in_ch: int, pool_features: int) -> None:
        super().__init__()
        self.branch1x1 = Conv(in_ch, 64, kernel_size=1)
        self.branch5x5_1 = Conv(in_ch, 48, kernel_size=1)
        self.branch5x5_2 = Conv(48, 64, kernel_size=5, padding=2)
        self.branch3x3dbl_1 = Conv(in_ch, 64, kernel_size=1)
        self.branch3x3dbl_2 = Conv(64, 96, kernel_size=3, padding=1)
        self.branch3x3dbl_3 = Conv(96, 96, kernel_size=3, padding=1)
        self.pool = _same_pool()
        self.branch_pool = Conv(in_ch, pool_features, kernel_size=1)

    def forward(self, x: Tensor) -> Tensor:
        b5 = self.branch5x5_2(self.branch5x5_1(x))
        b3 = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        return torch.cat([self.branch1x1(x), b5, b3, self.branch_pool(self.pool(x))], 1)


class InceptionB(nn.Module):
    """35x35 -> 17x17 grid reduction."""

    def __init__(self, in_ch: int) -> None:
        super().__init__()
        self.branch3x3 = Conv(in_ch, 384, kernel_size=3, stride=2)
        self.branch3x3dbl_1 = Conv(in_ch, 64, kernel_size=1)
        self.branch3x3dbl_2 = Conv(64, 96, kernel_size=3, padding=1)
        self.branch3x3dbl_3 = Conv(96, 96, kernel_size=3, stride=2)
        self.pool = nn.MaxPool2d(3, stride=2)

    def forward(self, x: Tensor) -> Tensor:
        b3 = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        return torch.cat([self.branch3x3(x), b3, self.pool(x)], 1)


class InceptionC(nn.Module):
    """17x17 module with factorised 7x7 convolutions (1x7 then 7x1; the paper's figure 6)."""

    def __init__(self, in_ch: int, c7: int) -> None:
        super().__init__()
        row, col = {"kernel_size": (1, 7), "padding": (0, 3)}, {"kernel_size": (7, 1), "padding": (3, 0)}
        self.branch1x1 = Conv(in_ch, 192, kernel_size=1)
        self.branch7x7_1 = Conv(in_ch, c7, kernel_size=1)
        self.branch7x7_2 = Conv(c7, c7, **row)
        self.branch7x7_3 = Conv(c7, 192, **col)
        self.branch7x7dbl_1 = Conv(in_ch, c7, kernel_size=1)
        self.branch7x7dbl_2 = Conv(c7, c7, **col)
        self.branch7x7dbl_3 = Conv(c7, c7, **row)
        self.branch7x7dbl_4 = Conv(c7, c7, **col)
        self.branch7x7dbl_5 = Conv(c7, 192, **row)
        self.pool = _same_pool()
        self.branch_pool = Conv(in_ch, 192, kernel_size=1)

    def forward(self, x: Tensor) -> Tensor:
        b7 = self.branch7x7_3(self.branch7x7_2(self.branch7x7_1(x)))
        d7 = self.branch7x7dbl_1(x)
        for conv in (self.branch7x7dbl_2, self.branch7x7dbl_3, self.branch7x7dbl_4, self.branch7x7dbl_5):
            d7 = conv(d7)
        return torch.cat([self.branch1x1(x), b7, d7, self.branch_pool(self.pool(x))], 1)


class InceptionD(nn.Module):
    """17x17 -> 8x8 grid reduction."""

    def __init__(self, in_ch: int) -> None:
        super().__init__()
        self.branch3x3_1 = Conv(in_ch, 192, kernel_size=1)
        self.branch3x3_2 = Conv(192, 320, kernel_size=3, stride=2)
        self.branch7x7x3_1 = Conv(in_ch, 192, kernel_size=1)
        self.branch7x7x3_2 = Conv(192, 192, kernel_size=(1, 7), padding=(0, 3))
        self.branch7x7x3_3 = Conv(192, 192, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7x3_4 = Conv(192, 192, kernel_size=3, stride=2)
        self.pool = nn.MaxPool2d(3, stride=2)

    def forward(self, x: Tensor) -> Tensor:
        b3 = self.branch3x3_2(self.branch3x3_1(x))
        b7 = self.branch7x7x3_4(self.branch7x7x3_3(self.branch7x7x3_2(self.branch7x7x3_1(x))))
        return torch.cat([b3, b7, self.pool(x)], 1)


class InceptionE(nn.Module):
    """8x8 module with expanded filter banks (1x3 and 3x1 side by side; the paper's figure 7)."""

    def __init__(self, in_ch: int) -> None:
        super().__init__()
        row, col = {"kernel_size": (1, 3), "padding": (0, 1)}, {"kernel_size": (3, 1), "padding": (1, 0)}
        self.branch1x1 = Conv(in_ch, 320, kernel_size=1)
        self.branch3x3_1 = Conv(in_ch, 384, kernel_size=1)
        self.branch3x3_2a = Conv(384, 384, **row)
        self.branch3x3_2b = Conv(384, 384, **col)
        self.branch3x3dbl_1 = Conv(in_ch, 448, kernel_size=1)
        self.branch3x3dbl_2 = Conv(448, 384, kernel_size=3, padding=1)
        self.branch3x3dbl_3a = Conv(384, 384, **row)
        self.branch3x3dbl_3b = Conv(384, 384, **col)
        self.pool = _same_pool()
        self.branch_pool = Conv(in_ch, 192, kernel_size=1)

    def forward(self, x: Tensor) -> Tensor:
        b3 = self.branch3x3_1(x)
        b3 = torch.cat([self.branch3x3_2a(b3), self.branch3x3_2b(b3)], 1)
        d3 = self.branch3x3dbl_2(self.branch3x3dbl_1(x))
        d3 = torch.cat([self.branch3x3dbl_3a(d3), self.branch3x3dbl_3b(d3)], 1)
        return torch.cat([self.branch1x1(x), b3, d3, self.branch_pool(self.pool(x))], 1)


class InceptionAux(nn.Module):
    """Auxiliary classifier on the 17x17 grid: 5x5/3 average pool, 1x1 and 5x5 convs, one linear."""

    def __init__(self, in_ch: int, num_classes: int) -> None:
        super().__init__()
        self.pool = nn.AvgPool2d(5, stride=3)
        self.conv0 = Conv(in_ch, 128, kernel_size=1)
        self.conv1 = Conv(128, 768, kernel_size=5)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(768, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        x = self.avgpool(self.conv1(self.conv0(self.pool(x))))
        return self.fc(torch.flatten(x, 1))


class Inception3(nn.Module):
    """Stem, 3 x A, B, 4 x C (auxiliary head after the last), D, 2 x E, pooling, dropout, linear."""

    def __init__(self, num_classes: int, aux_logits: bool, dropout: float) -> None:
        super().__init__()
        self.Conv2d_1a_3x3 = Conv(3, 32, kernel_size=3, stride=2)
        self.Conv2d_2a_3x3 = Conv(32, 32, kernel_size=3)
        self.Conv2d_2b_3x3 = Conv(32, 64, kernel_size=3, padding=1)
        self.maxpool1 = nn.MaxPool2d(3, stride=2)
        self.Conv2d_3b_1x1 = Conv(64, 80, kernel_size=1)
        self.Conv2d_4a_3x3 = Conv(80, 192, kernel_size=3)
        self.maxpool2 = nn.MaxPool2d(3, stride=2)
        self.Mixed_5b = InceptionA(192, pool_features=32)
        self.Mixed_5c = InceptionA(256, pool_features=64)
        self.Mixed_5d = InceptionA(288, pool_features=64)
        self.Mixed_6a = InceptionB(288)
        self.Mixed_6b = InceptionC(768, c7=128)
        self.Mixed_6c = InceptionC(768, c7=160)
        self.Mixed_6d = InceptionC(768, c7=160)
        self.Mixed_6e = InceptionC(768, c7=192)
        self.AuxLogits = InceptionAux(768, num_classes) if aux_logits else None
        self.Mixed_7a = InceptionD(768)
        self.Mixed_7b = InceptionE(1280)
        self.Mixed_7c = InceptionE(2048)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(2048, num_classes)

    def forward(self, x: Tensor) -> Tensor | tuple[Tensor, Tensor]:
        """Logits; in training mode with the auxiliary head, (logits, auxiliary logits)."""
        for name in ("Conv2d_1a_3x3", "Conv2d_2a_3x3", "Conv2d_2b_3x3", "maxpool1", "Conv2d_3b_1x1",
                     "Conv2d_4a_3x3", "maxpool2", "Mixed_5b", "Mixed_5c", "Mixed_5d", "Mixed_6a",
                     "Mixed_6b", "Mixed_6c", "Mixed_6d", "Mixed_6e"):
            x = getattr(self, name)(x)
        aux = self.AuxLogits(x) if self.AuxLogits is not None and self.training else None
        x = self.Mixed_7c(self.Mixed_7b(self.Mixed_7a(x)))
        x = self.fc(self.dropout(torch.flatten(self.avgpool(x), 1)))
        return x if aux is None else (x, aux)


def build(*, num_classes: int = 1000, aux_logits: bool = False, dropout: float = 0.5) -> Inception3:
    """Inception v3; `aux_logits=True` adds the auxiliary classifier (torchvision's default)."""
    check_num_classes(num_classes)
    return Inception3(num_classes, aux_logits, dropout)
