"""FlatSGD equals torch.optim.SGD on the averaged gradient, with torch's fused kernel and without it."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from fabriclab.runtime import buckets
from fabriclab.runtime.buckets import FlatLayout, FlatSGD, SGDConfig


def _run(scale: float, config: SGDConfig, steps: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    params = [nn.Parameter(torch.randn(7, 5)), nn.Parameter(torch.randn(11))]
    reference = [nn.Parameter(p.detach().clone()) for p in params]
    layout = FlatLayout(params, [1, 1])
    sgd = FlatSGD(layout, config)
    opt = torch.optim.SGD(reference, lr=config.lr, momentum=config.momentum, weight_decay=config.weight_decay)
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        summed = torch.randn(layout.flat_grads.numel(), generator=g)
        layout.flat_grads.copy_(summed)  # what an all-reduce leaves: the sum over ranks
        for b in layout.buckets:
            sgd.update(b.start, b.stop, scale)
        offset = 0
        for p in reference:
            n = p.numel()
            p.grad = (summed[offset:offset + n] * scale).view_as(p).clone()
            offset += n
        opt.step()
    return layout.flat_params.clone(), torch.cat([p.detach().flatten() for p in reference])


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "three-pass"])
@pytest.mark.parametrize("scale", [1.0, 1 / 3, 0.25])
@pytest.mark.parametrize("config", [SGDConfig(lr=0.1, momentum=0.9, weight_decay=0.01),
                                    SGDConfig(lr=0.05, momentum=0.0, weight_decay=0.0)], ids=["momentum-wd", "plain"])
def test_flat_sgd_matches_torch_sgd(monkeypatch, fused, scale, config):
    if fused and buckets._FUSED_SGD is None:
        pytest.skip("this torch has no fused SGD kernel")
    if not fused:
        monkeypatch.setattr(buckets, "_FUSED_SGD", None)
    got, expected = _run(scale, config)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
