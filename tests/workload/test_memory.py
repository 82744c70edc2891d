"""Training memory per GPU against Megatron's bytes per parameter, Korthikanti et al.'s activation formulas
and configurations known to run (or not) on 80 GB GPUs."""

from dataclasses import replace

import pytest

from fabriclab.workload.memory import (
    check_fits,
    in_flight_microbatches,
    layer_activation_bytes,
    memory_per_gpu,
    memory_per_stage,
    stage_layers,
    trainer_state_bytes,
)
from fabriclab.workload.parallel import ParallelConfig
from fabriclab.workload.transformer import TransformerSpec, load_model

GPU_80GB = 80e9  # decimal GB: below the 85.9e9 bytes of an "80 GB" (GiB) H100 or A100, so the checks are strict


def tiny(**kw) -> TransformerSpec:
    """A GPT-like model (4h GELU MLP, multi-head attention) of a few layers."""
    args = dict(name="tiny", hidden_size=1024, intermediate_size=4096, num_layers=8, num_heads=16,
                num_kv_heads=16, vocab_size=32000, seq_length=2048, gated_mlp=False)
    return TransformerSpec(**(args | kw))


def test_megatron_bytes_per_parameter():
    # Megatron-LM distrib_optimizer.md, "bf16 param, fp32 grads": 18 B/param plain, 6 + 12/d distributed
    spec = tiny()
    n = spec.num_params()
    plain = memory_per_gpu(spec, ParallelConfig(num_gpus=4, gbs=4, seq=2048, zero=0))
    states = plain.weights_bytes + plain.gradients_bytes + plain.optimizer_bytes
    assert states == pytest.approx(18 * n, rel=1e-12)
    dist = memory_per_gpu(spec, ParallelConfig(num_gpus=4, gbs=4, seq=2048, zero=1))
    assert dist.weights_bytes + dist.gradients_bytes + dist.optimizer_bytes == pytest.approx((6 + 12 / 4) * n)
    z2 = memory_per_gpu(spec, ParallelConfig(num_gpus=4, gbs=4, seq=2048, zero=2))
    assert z2.gradients_bytes == pytest.approx(4 * n / 4)
    z3 = memory_per_gpu(spec, ParallelConfig(num_gpus=4, gbs=4, seq=2048, zero=3))
    largest = max(spec.embedding_params(), spec.output_params() + spec.hidden_size, sum(spec.layer_params(0)))
    assert z3.weights_bytes == pytest.approx(2 * n / 4 + 2 * largest)
    assert plain.total_bytes > dist.total_bytes > z2.total_bytes > z3.total_bytes


@pytest.mark.parametrize("tp", [1, 2, 8])
def test_gpt3_layer_activations_are_korthikanti_table_2(tp):
    # Korthikanti et al. 2022, Table 2, per layer: s b h (34 + 5as/h) / t with sequence parallelism,
    # s b h (10 + 24/t + 5as/(ht)) without, 34 s b h / t selective, 2 s b h / t full recomputation
    spec = load_model("gpt3-175b")
    s, b, h, a = 2048, 2, 12288, 96

    def act(**kw):
        par = ParallelConfig(num_gpus=tp, tp=tp, mbs=b, gbs=b, seq=s, flash_attention=False, **kw)
        return layer_activation_bytes(spec, par)

    assert act() == pytest.approx(s * b * h * (34 + 5 * a * s / h) / tp, rel=1e-12)
    assert act(sequence_parallel=False) == pytest.approx(s * b * h * (10 + 24 / tp + 5 * a * s / (h * tp)))
    assert act(recompute="selective") == pytest.approx(34 * s * b * h / tp)
    assert act(recompute="full") == pytest.approx(2 * s * b * h / tp)


def test_context_parallel_splits_the_sequence():
    spec = load_model("llama3-8b")
    one = layer_activation_bytes(spec, ParallelConfig(num_gpus=1, gbs=1, seq=8192, recompute="selective"))
    four = layer_activation_bytes(spec, ParallelConfig(num_gpus=4, cp=4, gbs=1, seq=8192, recompute="selective"))
    assert four == pytest.approx(one / 4)


def test_in_flight_microbatches():
    # 1F1B: stage r holds min(pp - r, m); interleaved stage 0: pp (1 + (pp - 1)/(pp vp)) (Korthikanti 4.2.3)
    par = ParallelConfig(num_gpus=8, pp=8, gbs=64, seq=2048)
    assert [in_flight_microbatches(par, r) for r in range(8)] == [8, 7, 6, 5, 4, 3, 2, 1]
    few = ParallelConfig(num_gpus=8, pp=8, gbs=3, seq=2048)
    assert in_flight_microbatches(few, 0) == 3
    inter = ParallelConfig(num_gpus=8, pp=8, vp=6, gbs=64, seq=2048)
    assert in_flight_microbatches(inter, 0) == pytest.approx(8 * (1 + 7 / 48))


def test_stage_layers():
    assert stage_layers(8, 2) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert stage_layers(8, 2, 2) == [[0, 1, 4, 5], [2, 3, 6, 7]]
    # Llama 3 405B on 16 stages: the embedding and the loss count as a layer each (Meta's split)
    assert [len(s) for s in stage_layers(126, 16)] == [7] + [8] * 14 + [7]
    assert [len(s) for s in stage_layers(10, 4)] == [2, 3, 3, 2]  # 10 + 2 = 12 on 4 stages
    assert [len(s) for s in stage_layers(9, 4)] == [3, 2, 2, 2]  # 11 does not divide either: the even split
    with pytest.raises(ValueError, match="cannot fill 16 model chunks"):
        stage_layers(8, 8, 2)


def test_gpt3_175b_nemo_recipe_fits_on_80_gb():
    # NVIDIA's NeMo GPT-3 175B recipe runs TP4 PP8 VP6, mbs 1, seq 2048 with the distributed optimizer and
    # FlashAttention (= selective recomputation's memory) on 80 GB H100s (shared/reference/llm-published.md)
    spec = load_model("gpt3-175b")
    par = ParallelConfig(num_gpus=128, tp=4, pp=8, vp=6, gbs=256, seq=2048, zero=1, recompute="selective")
    mem = memory_per_gpu(spec, par)
    assert mem.stage == 0
    check_fits(mem, GPU_80GB)
    assert 60e9 < mem.total_bytes < GPU_80GB
    # the same with the attention scores materialised (no FlashAttention, no recomputation) does not
    with pytest.raises(ValueError, match="does not fit"):
        check_fits(memory_per_gpu(spec, ParallelConfig(num_gpus=128, tp=4, pp=8, vp=6, gbs=256, seq=2048,
                                                       zero=1, recompute="none", flash_attention=False)),
                   GPU_80GB)
    # with it (the default) no recomputation keeps what selective does
    none = memory_per_gpu(spec, ParallelConfig(num_gpus=128, tp=4, pp=8, vp=6, gbs=256, seq=2048, zero=1))
    assert none.total_bytes == pytest.approx(mem.total_bytes)


def test_gpt3_175b_tp8_pp8_needs_selective_recompute():
    # Korthikanti et al. 2022 (Table 3's 175B: t 8, p 8): the 5as/h attention term is what breaks 80 GB
    spec = load_model("gpt3-175b")
    base = dict(num_gpus=64, tp=8, pp=8, gbs=64, seq=2048, zero=0, flash_attention=False)
    check_fits(memory_per_gpu(spec, ParallelConfig(**base, recompute="selective")), GPU_80GB)
    with pytest.raises(ValueError, match="does not fit"):
        check_fits(memory_per_gpu(spec, ParallelConfig(**base, recompute="none")), GPU_80GB)


def test_llama3_70b_on_8_gpus_without_sharding_does_not_fit():
    # 70.6e9 params x 18 B / 8 GPUs = 159 GB of model state alone
    spec = load_model("llama3-70b")
    mem = memory_per_gpu(spec, ParallelConfig(num_gpus=8, tp=8, gbs=8, seq=8192, zero=0, recompute="full"))
    assert mem.weights_bytes + mem.gradients_bytes + mem.optimizer_bytes == pytest.approx(
        18 * spec.num_params() / 8, rel=0.001)
    with pytest.raises(ValueError) as err:
        check_fits(mem, GPU_80GB)
    message = str(err.value)
    assert message.startswith("does not fit: needs 16") and "of 80.0 GB" in message
    assert "optimizer 105.8" in message and "try --zero 1, larger --tp/--pp" in message


def test_moe_experts_are_split_over_etp_x_ep_and_sharded_over_expert_dp():
    # the experts' grid folds over the stage's tp x cp x dp = 16 GPUs: split over etp x ep, copied edp times
    spec = load_model("mixtral-8x7b")
    expert = spec.num_layers * spec.num_experts * spec.expert_params()
    dense = spec.num_params() - expert
    for ep, etp, zero in [(1, 1, 0), (8, 1, 0), (8, 2, 1), (4, 1, 2), (8, 1, 1), (2, 2, 1)]:
        par = ParallelConfig(num_gpus=16, tp=2, ep=ep, etp=etp, gbs=8, seq=4096, zero=zero)
        mem = memory_per_gpu(spec, par)
        per_gpu = dense / 2 + expert / (ep * etp)
        assert mem.num_params == pytest.approx(per_gpu, rel=1e-9)
        assert mem.num_expert_params == pytest.approx(expert / (etp * ep))
        shards = (8, 16 // (etp * ep)) if zero >= 1 else (1, 1)
        assert mem.optimizer_bytes == pytest.approx(12 * (dense / 2 / shards[0] + expert / (etp * ep) / shards[1]))


def test_moe_layer_activations_count_the_routed_tokens():
    spec = load_model("mixtral-8x7b")
    par = ParallelConfig(num_gpus=1, gbs=1, seq=4096, recompute="selective")
    s, h, f = 4096, 4096, 14336
    moe = layer_activation_bytes(spec, par, moe_layer=True)
    # dense part without an MLP (10 + 4 + 4 kv/h) s h, router logits 4 s E, top-2 x (copy 2h + SwiGLU 6f)
    expected = (10 + 4 + 4 * 1024 / h) * s * h + 4 * s * 8 + 2 * s * (2 * h + 6 * f)
    assert moe == pytest.approx(expected)


def test_most_loaded_stage_of_a_moe_model_with_dense_first_layers():
    # DeepSeek-V3-like: the first stage's 3 dense layers are lighter than 4 MoE layers' activations
    spec = load_model("deepseek-v3")
    par = ParallelConfig(num_gpus=2048, pp=16, ep=64, gbs=15360, seq=4096, zero=1, recompute="selective")
    stages = memory_per_stage(spec, par)
    worst = memory_per_gpu(spec, par)
    assert worst.total_bytes == max(m.total_bytes for m in stages) and worst.stage == 1
    assert stages[0].weights_bytes > stages[1].weights_bytes  # the embedding and dense MLPs


def test_rows_and_suggestions():
    mem = memory_per_gpu(tiny(), ParallelConfig(num_gpus=1, gbs=1, seq=2048, zero=2, recompute="selective"))
    rows = mem.rows()
    assert [r["part"] for r in rows] == ["weights", "gradients", "optimizer", "activations", "total"]
    assert rows[-1]["bytes"] == mem.total_bytes == sum(r["bytes"] for r in rows[:-1])
    with pytest.raises(ValueError, match="try --zero 3, --recompute full, larger --tp/--pp$"):
        check_fits(mem, 1e9)
    check_fits(mem, 100e9)


def test_the_trainers_state_per_rank_counts_weights_gradients_and_sharded_adam():
    spec = load_model("gpt-tiny")
    whole = ParallelConfig(num_gpus=4, gbs=4, seq=64, sequence_parallel=False, zero=0)
    params = spec.num_params()
    assert trainer_state_bytes(spec, whole, 4) == pytest.approx(4 * params * 5)  # w, grad, shard grad, m, v
    sharded = replace(whole, zero=1)
    assert trainer_state_bytes(spec, sharded, 4) == pytest.approx(4 * params * (2 + 3 / 4))
    assert trainer_state_bytes(spec, replace(whole, zero=3), 2) == pytest.approx(2 * params * (3 + 3 / 4))
