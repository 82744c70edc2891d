"""Building blocks the CNN families share.

Try it: `python -c "from fabriclab.workload.models.common import ConvBNReLU; print(ConvBNReLU(3, 8, kernel_size=3))"`.
"""

from __future__ import annotations

from torch import Tensor, nn


class ConvBNReLU(nn.Module):
    """Convolution without bias, batch norm, ReLU: torchvision's `BasicConv2d` of GoogLeNet and
    Inception v3 (same parameter names `conv` and `bn`; eps 0.001 as in the TensorFlow originals)."""

    def __init__(self, in_channels: int, out_channels: int, **conv_kwargs) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, bias=False, **conv_kwargs)
        self.bn = nn.BatchNorm2d(out_channels, eps=0.001)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: Tensor) -> Tensor:
        return self.relu(self.bn(self.conv(x)))


def check_num_classes(num_classes: int) -> None:
    if num_classes < 1:
        raise ValueError(f"num_classes must be >= 1, got {num_classes}")
