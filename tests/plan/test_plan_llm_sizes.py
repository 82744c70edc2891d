"""The nearest GPU counts an LLM plan takes (`plan/llm/sizes.py`): per cluster the nearest counts below and
above that fill whole servers or racks and split with the global batch, the batches that would split the count
asked for, and whole NVL72 racks with their batches."""

import pytest

from fabriclab.fabric.presets import cluster_preset
from fabriclab.plan.llm import LlmPlanRequest, run_llm_plan
from fabriclab.plan.llm.sizes import describe_sizes, nearest_sizes, takes
from fabriclab.workload.transformer import load_model

SPEC = load_model("llama3-405b")
CLUSTERS = tuple((n, cluster_preset(n)) for n in ("hgx-b200", "gb200-nvl72"))


def test_8000_gpus_are_between_7936_and_8192_and_whole_racks_of_72_say_their_batches():
    hgx, nvl = nearest_sizes(SPEC, CLUSTERS, 8000, gbs=2048, seq=8192)
    for s, cluster in zip((hgx, nvl), (c for _, c in CLUSTERS)):
        assert (s.below, s.above) == (7936, 8192)
        assert not takes(SPEC, cluster, 8000, gbs=2048, seq=8192)
        assert all(takes(SPEC, cluster, n, gbs=2048, seq=8192) for n in (s.below, s.above))
        step = cluster.server.gpus_per_server
        assert not any(takes(SPEC, cluster, n, gbs=2048, seq=8192) for n in range(s.below + step, s.above, step))
        low, high = s.batches  # 8,000 itself splits at these batches, none between them
        assert low < 2048 < high and all(takes(SPEC, cluster, 8000, gbs=b, seq=8192) for b in (low, high))
        assert not any(takes(SPEC, cluster, 8000, gbs=b, seq=8192) for b in range(low + 1, high))
    assert hgx.racks == () and nvl.domain_gpus == 72
    assert [n for n, _ in nvl.racks] == [7992, 8064]
    racks = dict(nvl.racks)
    assert all(takes(SPEC, CLUSTERS[1][1], n, gbs=b, seq=8192) for n, pair in racks.items() for b in pair)
    text = describe_sizes([hgx, nvl])
    assert text.startswith("on hgx-b200 7,936 or 8,192 GPUs, or 8,000 with --gbs ")
    assert "whole racks of 72: 7,992 with --gbs" in text and ", 8,064 with --gbs" in text


def test_8064_gpus_whole_racks_say_the_global_batches_that_divide():
    (nvl,) = nearest_sizes(SPEC, CLUSTERS[1:], 8064, gbs=2048, seq=8192)
    low, high = nvl.batches
    assert low < 2048 < high and all(takes(SPEC, CLUSTERS[1][1], 8064, gbs=b, seq=8192) for b in (low, high))
    assert f"8,064 with --gbs {low:,} or {high:,}" in describe_sizes([nvl])


def _request(gpus: int) -> LlmPlanRequest:
    return LlmPlanRequest(model="llama3-8b", gpus=(gpus,), clusters=(("dgx-h100", cluster_preset("dgx-h100")),),
                          gbs=256, seq=4096)


@pytest.mark.parametrize("gpus, fragment", [
    (60, "--gpus 60 is not a multiple of 8: dgx-h100 has 8 GPUs per server and a plan fills whole servers; "
         "nearest sizes that divide: on dgx-h100 56 or 64 GPUs"),
    # 992 = 31 x 32 would need 31 stages of 32 layers; 1,000 = TP8 PP5 DP25 at a batch of 250 or 275
    (1000, "no parallel configuration divides 1,000 GPUs with a global batch of 256; nearest sizes that divide: "
           "on dgx-h100 960 or 1,024 GPUs, or 1,000 with --gbs 250 or 275"),
])
def test_the_plan_refuses_a_count_with_the_nearest_that_divide(gpus, fragment):
    with pytest.raises(ValueError) as info:
        run_llm_plan(_request(gpus))
    assert fragment in str(info.value)
