"""The step program: per layer and stage, the calls the frameworks make, counted by hand; ZeRO-3 per unit with
its prefetch stream against closed forms; HSDP's groups; full recompute re-running the all-to-alls; every
stage's split adding up."""

from dataclasses import replace

import pytest

from fabriclab.fabric.presets import cluster_preset
from fabriclab.whatif.llm.program import (BUCKET_MIN_PARAMS, EMBEDDING, OUTPUT, Call, Work, build_program,
                                         ProgramOptions, stage_calls)
from fabriclab.whatif.llm.run import simulate_llm
from fabriclab.whatif.llm.step import StepOptions
from fabriclab.workload.parallel import ParallelConfig
from fabriclab.workload.transformer import load_model

H100 = cluster_preset("dgx-h100")
LLAMA8 = load_model("llama3-8b")
DSV3 = load_model("deepseek-v3")


def _calls(program, stage, communicator, collective=None):
    return sum(n for c, n in stage_calls(program, stage)
               if c.communicator == communicator and (collective is None or c.collective == collective))


def test_each_layer_holds_the_megatron_calls_per_pass():
    par = ParallelConfig(num_gpus=16, tp=2, pp=2, gbs=32, seq=2048)
    p = build_program(LLAMA8, par)
    m = par.num_microbatches
    layers = LLAMA8.num_layers // 2
    # sequence parallel: 2 all-gathers and 2 reduce-scatters per layer, forward and backward
    assert _calls(p, 0, "tp", "allgather") == _calls(p, 0, "tp", "reduce_scatter") == 2 * 2 * layers * m
    first = p.chunk(0, 0).forward
    assert first[0].layer == EMBEDDING and p.chunk(1, 0).forward[-1].layer == OUTPUT
    act = par.mbs * par.seq * LLAMA8.hidden_size * 2
    assert all(c.size_bytes == act for lp in first for c in lp.ops if isinstance(c, Call))
    # pipeline: stage 0 sends every micro-batch's activation, stage 1 every gradient
    assert [(s.peer_stage, s.count) for s in p.sends[0]] == [(1, m)]
    assert [(s.peer_stage, s.count) for s in p.sends[1]] == [(0, m)]
    assert p.sends[0][0].call.size_bytes == act / par.tp
    no_sp = build_program(LLAMA8, replace(par, sequence_parallel=False))
    assert _calls(no_sp, 0, "tp", "allreduce") == 2 * 2 * layers * m and _calls(no_sp, 0, "tp", "allgather") == 0


def test_interleaving_sends_wrap_from_the_last_stage_to_the_first():
    par = ParallelConfig(num_gpus=16, tp=2, pp=2, vp=2, gbs=32, seq=2048)
    p = build_program(LLAMA8, par)
    m = par.num_microbatches
    # stage 1: chunk 0's activations wrap to stage 0's chunk 1, both chunks' gradients go back to stage 0;
    # stage 0: both chunks' activations forward, chunk 1's gradients wrap to the last stage's chunk 0
    for stage, peer in ((1, 0), (0, 1)):
        assert {s.peer_stage for s in p.sends[stage]} == {peer}
        assert sum(s.count for s in p.sends[stage]) == 3 * m


def test_moe_layers_dispatch_and_combine_and_full_recompute_runs_them_again():
    par = ParallelConfig(num_gpus=256, tp=1, pp=4, ep=32, gbs=256, seq=1024)
    m = par.num_microbatches
    for recompute, per_layer in (("none", 4), ("selective", 4), ("full", 6)):
        p = build_program(DSV3, replace(par, recompute=recompute))
        moe = [sum(DSV3.is_moe_layer(i) for i in p.chunk(s, 0).layers if i >= 0) for s in range(4)]
        assert moe[0] == len([i for i in p.chunk(0, 0).layers if i >= 0]) - DSV3.first_dense_layers
        for s in range(4):
            assert _calls(p, s, "ep", "alltoall") == per_layer * moe[s] * m, (recompute, s)
    full = build_program(LLAMA8, ParallelConfig(num_gpus=16, tp=2, gbs=16, seq=2048, recompute="full"))
    assert _calls(full, 0, "tp") == 3 * 2 * 2 * LLAMA8.num_layers * 2  # TP re-run in backward: 3 passes' worth


def test_zero3_gathers_every_unit_before_each_pass_and_reduces_after_backward():
    par = ParallelConfig(num_gpus=16, tp=2, zero=3, gbs=16, seq=2048)
    m, n = par.num_microbatches, LLAMA8.num_layers
    for unit in (1, 4):
        p = build_program(LLAMA8, par, ProgramOptions(fsdp_unit=unit))
        units = n // unit + 2  # and the embedding and the output layer
        assert _calls(p, 0, "dpcp", "allgather") == 2 * units * m
        assert _calls(p, 0, "dpcp", "reduce_scatter") == units * m
        gathered = sum(c.size_bytes * k for c, k in stage_calls(p, 0) if c.communicator == "dpcp" and c.collective == "allgather") / (2 * m)
        assert gathered == pytest.approx(LLAMA8.num_params() / par.tp * 2, rel=1e-3)  # bf16, all but the norm
        assert not p.chunk(0, 0).buckets


def test_fsdp_prefetch_hides_gathers_shorter_than_compute_and_serialises_longer_ones():
    """Closed forms of the two-stream pass: gather g and compute c per layer, n layers. With g < c the pass
    takes g (the first gather) + n c; with g > c it takes n g + c (each layer waits for its gather)."""
    par = ParallelConfig(num_gpus=64, tp=1, zero=3, gbs=64, seq=2048, recompute="none")
    answer = simulate_llm(LLAMA8, par, H100, efficiency=0.5, check_memory=False)
    model = answer.result.model
    body = [lp for lp in model.program.chunk(0, 0).forward if lp.layer >= 0]
    compute, _, gather, _ = model.layer_cost(body[1])
    n = len(body)

    def pass_time(g, c):
        return g + n * c if g <= c else n * g + c

    for scale in (0.3, 3.0):  # make gathers shorter, then longer, than the layer's compute
        model._layer_cache = {}
        fake = {id(lp): (compute, {}, compute * scale, 0.0) for lp in body}
        original = model.layer_cost
        model.layer_cost = lambda lp: fake[id(lp)]
        try:
            cost = model._pass(tuple(body))
        finally:
            model.layer_cost = original
        assert cost.total_s == pytest.approx(pass_time(compute * scale, compute), rel=1e-9)
        assert cost.exposed_s["dp"] == pytest.approx(cost.total_s - n * compute, rel=1e-9)


def test_zero3_at_4096_gpus_is_costed_per_layer():
    """Llama-3-70B, TP1 CP4 ZeRO-3 on 4,096 H100s: 80 per-layer gathers per pass on 1,024 x 4 ranks cost far
    more than one whole-model gather would, and the step shows them."""
    spec = load_model("llama3-70b")
    par = ParallelConfig(num_gpus=4096, tp=1, cp=4, zero=3, gbs=1024, seq=8192, recompute="full")
    a = simulate_llm(spec, par, H100, efficiency=0.5, check_memory=False)
    gathers = [e for e in a.result.comm if e["communicator"] == "dpcp" and e["collective"] == "allgather"]
    layer = max(gathers, key=lambda e: e["calls_per_step"])
    assert layer["calls_per_step"] == 2 * spec.num_layers * par.num_microbatches
    assert layer["size_bytes"] == pytest.approx(sum(spec.layer_params(0)) * 2)
    assert a.result.split_s["dp"] > 0.1 * a.step_time_s
    whole = a.result.model.comm.time("dpcp", "allgather", layer["size_bytes"] * spec.num_layers)
    assert layer["time_s"] * spec.num_layers > 1.5 * whole  # per-layer calls pay the ring's latency 80 times


def test_hsdp_shards_inside_groups_and_all_reduces_across_them():
    par = ParallelConfig(num_gpus=64, tp=1, zero=3, gbs=64, seq=2048)
    a = simulate_llm(LLAMA8, par, H100, efficiency=0.5, options=StepOptions(shard_group=8), check_memory=False)
    shapes = a.result.model.comm.shapes
    assert (shapes["shard"].num_gpus, shapes["shard"].num_servers) == (8, 1)  # one server: NVLink only
    assert (shapes["replica"].num_gpus, shapes["replica"].num_servers) == (8, 8)
    names = {(e["communicator"], e["collective"]) for e in a.result.comm}
    assert {("shard", "allgather"), ("shard", "reduce_scatter"), ("replica", "allreduce")} <= names
    assert not any(e["communicator"] == "dpcp" for e in a.result.comm)
    replica = next(e for e in a.result.comm if e["communicator"] == "replica")
    assert replica["calls_per_step"] == 1
    assert replica["size_bytes"] == pytest.approx(LLAMA8.num_params() * 4 / 8, rel=1e-3)  # fp32 gradients
    plain = simulate_llm(LLAMA8, par, H100, efficiency=0.5, check_memory=False)
    assert a.memory.weights_bytes > plain.memory.weights_bytes  # a shard of 8, not of 64
    with pytest.raises(ValueError, match="shard-group"):
        simulate_llm(LLAMA8, par, H100, options=StepOptions(shard_group=7))
    with pytest.raises(ValueError, match="--zero 3"):
        simulate_llm(LLAMA8, replace(par, zero=1), H100, options=StepOptions(shard_group=8))


def test_megatron_buckets_follow_the_backward_and_grow_with_dp():
    par = ParallelConfig(num_gpus=16, tp=1, pp=1, gbs=16, seq=2048, zero=1)
    p = build_program(LLAMA8, par)
    buckets = p.chunk(0, 0).buckets
    assert buckets[0].layers[0] == OUTPUT  # the backward's first gradients
    assert sum(len(b.layers) for b in buckets) == LLAMA8.num_layers + 2
    per_layer = sum(LLAMA8.layer_params(0))
    assert per_layer > BUCKET_MIN_PARAMS  # a Llama-3-8B layer fills a bucket alone
    big = build_program(LLAMA8, replace(par, num_gpus=2048, gbs=2048))  # 1M x 2,048 ranks: 2 layers a bucket
    assert len(big.chunk(0, 0).buckets) < len(buckets)


def test_every_stage_splits_the_step_and_the_moe_stages_show_their_all_to_all():
    par = ParallelConfig(num_gpus=256, tp=1, pp=4, ep=32, gbs=256, seq=1024)
    a = simulate_llm(DSV3, par, H100, efficiency=0.5, check_memory=False)
    for split in a.result.split_by_stage:
        assert sum(split.values()) == pytest.approx(a.step_time_s, rel=1e-9)
    ep = [split["ep"] for split in a.result.split_by_stage]
    assert ep[0] < ep[1] == pytest.approx(ep[2])  # stage 0 has 3 dense layers
    assert a.result.split_s == a.result.split_by_stage[a.result.slowest_stage]
    assert a.result.slowest_stage != 0


def test_works_carry_flops_that_add_up_to_the_model_flops():
    par = ParallelConfig(num_gpus=8, tp=2, pp=2, gbs=8, seq=2048, recompute="none")
    p = build_program(LLAMA8, par)
    fwd = sum(op.flops for (s, v), c in p.chunks.items() for lp in c.forward for op in lp.ops if isinstance(op, Work))
    bwd = sum(op.flops for (s, v), c in p.chunks.items() for lp in c.backward for op in lp.ops if isinstance(op, Work))
    tokens = par.mbs * par.seq
    assert (fwd + bwd) * par.tp == pytest.approx(LLAMA8.model_flops_per_token(par.seq) * tokens, rel=1e-6)
    assert all(op.memory_bytes > 0 for c in p.chunks.values() for lp in c.forward for op in lp.ops
               if isinstance(op, Work))

