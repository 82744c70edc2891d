"""The trainer's own cost on one GPU: `fabriclab train --np 1` against a plain PyTorch loop of the same
model, batch, precision and data (`bench.train_overhead`), goal >= 0.97x."""

from __future__ import annotations

import pytest

from fabriclab.bench.train.overhead import GOAL_RATIO, OverheadConfig, run_overhead

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("precision, channels_last", [("fp32", False), ("fp16", True)])
def test_trainer_overhead_on_one_gpu(precision, channels_last):
    config = OverheadConfig(model="resnet50", batch_size=64, device="cuda", precision=precision,
                            channels_last=channels_last, steps=40, warmup=10, rounds=3)
    result = run_overhead(config)
    print(f"resnet50 batch 64 {precision}{' channels-last' if channels_last else ''}: ours "
          f"{result['ours_images_per_sec']:.1f} img/s, plain {result['plain_images_per_sec']:.1f} img/s, "
          f"ratio {result['ratio']:.3f} (rounds {[round(r['ratio'], 3) for r in result['rounds']]})")
    assert result["ratio"] >= GOAL_RATIO
