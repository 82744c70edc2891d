"""The plan's search as the published recipes run: the experts folded over a stage (ETP x EP from TP x CP x DP),
interleaving of layers that divide only with the embedding and the loss counted (Meta's uneven split), and TP
overlap tried both ways."""

from fabriclab.fabric.presets import cluster_preset
from fabriclab.plan.llm.evaluator import Evaluator
from fabriclab.plan.llm.space import SearchBounds, _vps, enumerate_configs
from fabriclab.whatif.llm.run import simulate_llm
from fabriclab.workload.parallel import ParallelConfig
from fabriclab.workload.transformer import load_model


def test_interleaving_keeps_meta_s_uneven_split():
    llama = load_model("llama3-405b")  # 126 layers: + embedding + loss = 128
    assert 4 in _vps(llama, 16) and 8 in _vps(llama, 8) and 4 in _vps(llama, 8)
    qwen = load_model("qwen3-235b-a22b")  # 94 layers: + 2 = 96, Megatron-Bridge's PP4 VP12 and PP8 VP3
    assert 12 in _vps(qwen, 4) and 3 in _vps(qwen, 8)
    assert 5 in _vps(load_model("llama3-70b"), 4)  # 80 layers, PP4 VP5 (NVIDIA's 70B recipes)
    # what the plan keeps whatif llm runs, split as it splits
    par = ParallelConfig(num_gpus=256, tp=4, pp=16, vp=4, gbs=1536, seq=8192, recompute="full")
    configs = enumerate_configs(llama, 256, 64, gbs=1536, seq=8192, bounds=SearchBounds(tp=(4,), pp=(16,)))
    assert any(p.vp == 4 for p in configs)
    assert simulate_llm(llama, par, cluster_preset("gb200-nvl72")).step_time_s > 0


def test_the_experts_fold_over_tp_cp_dp_in_the_search():
    qwen = load_model("qwen3-235b-a22b")
    configs = enumerate_configs(qwen, 256, 8, gbs=8192, seq=4096, bounds=SearchBounds(tp=(2,), pp=(8,)))
    folds = {(p.etp, p.ep) for p in configs}
    assert (1, 32) in folds  # NVIDIA's H100 recipe: EP32 over DP16, TP's ranks folded in
    assert (2, 8) in folds   # ETP = TP, Megatron-LM's default
    assert all((p.tp * p.cp * p.dp) % (p.etp * p.ep) == 0 for p in configs)


def test_tp_overlap_is_tried_both_ways_and_the_faster_kept():
    spec, h100 = load_model("llama3-8b"), cluster_preset("dgx-h100")
    ev = Evaluator(spec, h100)
    par = ParallelConfig(num_gpus=64, tp=4, pp=2, gbs=128, seq=4096)
    assert [o.tp_overlap for o in ev.variants(par)] == [False, True]
    assert [o.tp_overlap for o in ev.variants(ParallelConfig(num_gpus=64, tp=1, gbs=128, seq=4096))] == [False]
    best = ev.simulate(par)
    steps = [simulate_llm(spec, par, h100, options=o).step_time_s for o in ev.variants(par)]
    assert best.step_time_s == min(steps)
