"""The profiler on a GPU: per-layer timing with CUDA events and no synchronise per layer keeps the
hooked iteration within 10 % of the plain one (the issue's H100 figures before: ResNet-50 at batch 64,
37.9 ms plain and 68.4 ms hooked), and the `.bk.log` it writes reads back in the published format."""

from __future__ import annotations

import pytest

from fabriclab.workload.profile import read_bk_log, write_bk_log
from fabriclab.workload.profiler import profile_model

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("model", ["resnet50", "vgg16"])
def test_hooked_iteration_within_ten_percent_of_the_plain_one(model, tmp_path):
    profile = profile_model(model, 64, "cuda", warmup=3, repeats=10)
    plain, hooked = profile.iteration_s, profile.extra["hooked_iteration_s"]
    print(f"{model} batch 64 on {profile.device}: plain {plain * 1e3:.1f} ms, hooked {hooked * 1e3:.1f} ms "
          f"({hooked / plain:.3f}x)")
    assert hooked <= 1.10 * plain
    assert all(layer.backward_s > 0 for layer in profile.layers if layer.param_bytes)
    again = read_bk_log(write_bk_log(profile, tmp_path / f"{model}.bk.log"), iteration_s=plain, batch_size=64)
    assert [g.size_bytes for g in again.grads] == [g.size_bytes for g in profile.grads]
    ready = [g.ready_s for g in again.grads]
    assert ready == sorted(ready) and ready[-1] < plain
