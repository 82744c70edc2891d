"""The exported graphs replayed stage against stage: they give the step model's step (the export and the
model are one program), and ASTRA-sim's one-collective rule only lengthens it where two streams overlap."""

import pytest

from fabriclab.fabric.presets import cluster_preset
from fabriclab.whatif.llm.replay import replay_step
from fabriclab.whatif.llm.run import simulate_llm
from fabriclab.whatif.llm.step import StepOptions
from fabriclab.workload.parallel import ParallelConfig
from fabriclab.workload.transformer import load_model

H100 = cluster_preset("dgx-h100")
CASES = [("llama3-8b", dict(num_gpus=16, tp=2, pp=2, gbs=32), StepOptions()),
         ("llama3-8b", dict(num_gpus=16, tp=2, pp=2, vp=2, gbs=32), StepOptions()),
         ("llama3-8b", dict(num_gpus=16, tp=2, pp=2, cp=2, gbs=32), StepOptions()),
         ("llama3-8b", dict(num_gpus=16, tp=2, pp=2, zero=3, gbs=32), StepOptions()),
         ("llama3-8b", dict(num_gpus=32, tp=2, zero=3, gbs=32), StepOptions(shard_group=8)),
         ("llama3-8b", dict(num_gpus=16, tp=4, pp=2, gbs=32, recompute="full", zero=0), StepOptions(tp_overlap=True)),
         ("mixtral-8x7b", dict(num_gpus=32, tp=2, pp=2, ep=4, gbs=32, seq=4096), StepOptions()),
         ("mixtral-8x7b", dict(num_gpus=32, ep=8, gbs=64, seq=4096, recompute="full"), StepOptions(ep_overlap=True))]


@pytest.mark.parametrize("model,kw,options", CASES)
def test_the_replayed_export_gives_the_models_step(model, kw, options):
    par = ParallelConfig(seq=kw.pop("seq", 8192), **kw)
    answer = simulate_llm(load_model(model), par, H100, efficiency=0.5, options=options, check_memory=False)
    replayed = replay_step(answer)
    assert replayed == pytest.approx(answer.step_time_s, rel=0.01)
    assert replay_step(answer, one_collective_at_a_time=True) >= replayed * (1 - 1e-9)


def test_one_collective_at_a_time_costs_zero3_its_overlap():
    """FSDP's gathers beside TP's collectives: under ASTRA-sim's rule they queue, and the step grows by at
    most the gathers' whole time (no overlap at all)."""
    par = ParallelConfig(num_gpus=32, tp=2, zero=3, gbs=32, seq=8192)
    answer = simulate_llm(load_model("llama3-8b"), par, H100, efficiency=0.5, check_memory=False)
    serial = replay_step(answer, one_collective_at_a_time=True)
    gathers = sum(e["time_s"] * e["calls_per_step"] for e in answer.result.comm if e["communicator"] == "dpcp")
    assert answer.step_time_s * 1.05 < serial <= answer.step_time_s + gathers
