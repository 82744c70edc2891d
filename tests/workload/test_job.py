"""One check of an LLM job (workload/job.py) for every command that takes one, and the job's bounds
(workload/parallel.py): the simulator, the plan's search and the trainer refuse the same splits with the
same message (issue 38: `whatif llm` accepted --ep 2 on a dense model, 8 experts over --ep 3, 20 heads at
--tp 8, which the trainer refused)."""

import pytest

from fabriclab.plan.llm.space import enumerate_configs
from fabriclab.workload.job import check_job, job_problem
from fabriclab.workload.parallel import MAX_GPUS, MAX_PIPELINE_PASSES, ParallelConfig
from fabriclab.workload.transformer import load_model, spec_from_config

HEADS20 = spec_from_config({"hidden_size": 2560, "num_attention_heads": 20, "intermediate_size": 10240,
                            "num_hidden_layers": 4, "vocab_size": 32000, "max_position_embeddings": 2048},
                           name="heads20")


def par(**kw) -> ParallelConfig:
    return ParallelConfig(**{"num_gpus": 64, "gbs": 64, "seq": 2048, **kw})


@pytest.mark.parametrize("spec, split, fragment", [
    (load_model("llama3-8b"), dict(tp=2, ep=2), "--ep 2 needs an MoE model"),
    (load_model("mixtral-8x7b"), dict(num_gpus=48, tp=2, ep=3, gbs=48), "the same number of experts): use --ep 1, "
                                                                        "2, 4 or 8"),
    (HEADS20, dict(tp=8), "20 attention heads and 20 key/value heads must split over --tp 8"),
    (load_model("llama3-8b"), dict(num_gpus=48, tp=3, gbs=48), "use --tp 1, 2, 4 or 8"),  # 8 key/value heads
    (load_model("gpt3-175b"), dict(num_gpus=48, tp=3, gbs=48, seq=2050), "--seq 2050 must be a multiple of --tp 3"),
])
def test_a_split_the_model_cannot_take_is_one_message(spec, split, fragment):
    p = par(**split)
    with pytest.raises(ValueError) as err:
        check_job(spec, p)
    assert fragment in str(err.value) and str(err.value) == job_problem(spec, p)


def test_a_split_the_model_takes_passes_and_the_plan_only_enumerates_such():
    assert job_problem(load_model("mixtral-8x7b"), par(tp=2, ep=8)) is None
    spec = load_model("llama3-8b")
    configs = enumerate_configs(spec, 64, 8, gbs=64, seq=2050)  # 2050 is no multiple of 4 or 8
    assert configs and all(job_problem(spec, p) is None for p in configs)
    assert {p.tp for p in configs} == {1, 2}


def test_the_plan_leaves_out_steps_beyond_the_pipeline_bound():
    spec = load_model("gpt-tiny")
    configs = enumerate_configs(spec, 8, 8, gbs=1 << 20, seq=64)
    assert configs and all(p.num_microbatches * p.pp * p.vp <= MAX_PIPELINE_PASSES for p in configs)
    assert not [p for p in configs if p.tp == 4 and p.mbs == 1]  # DP 2: 2^19 micro-batches, refused everywhere


def test_the_counts_of_a_job_are_bounded_with_the_bound_in_the_message():
    with pytest.raises(ValueError, match="--gpus 999999999999999992: a job here has at most 1,048,576 GPUs"):
        ParallelConfig(num_gpus=999999999999999992, gbs=999999999999999992, seq=8)
    ParallelConfig(num_gpus=MAX_GPUS, tp=8, gbs=MAX_GPUS // 8, seq=8)
    with pytest.raises(ValueError, match=r"250,000,000 micro-batches .* at most 262,144 .* give --gbs <= 8,388,608"):
        ParallelConfig(num_gpus=64, tp=2, gbs=8_000_000_000, seq=8)
    ParallelConfig(num_gpus=8, pp=8, vp=4, gbs=MAX_PIPELINE_PASSES // 32, seq=8)


def test_a_group_that_sits_unevenly_on_servers_is_found():
    assert par(tp=2).uneven_group(8) is None
    name, group, servers, most = ParallelConfig(num_gpus=96, tp=2, pp=8, gbs=96, seq=8).uneven_group(8)
    assert (name, group, servers, most) == ("dp", [0, 2, 4, 6, 8, 10], 2, 4)
    assert ParallelConfig(num_gpus=24, tp=3, gbs=24, seq=9).uneven_group(8)[0] == "dp"


def test_whatif_names_the_users_numbers_when_tp_straddles_servers():
    from fabriclab.fabric.presets import cluster_preset
    from fabriclab.whatif.llm.run import simulate_llm

    spec, cluster = load_model("gpt3-175b"), cluster_preset("dgx-h100")
    with pytest.raises(ValueError, match=r"--gpus 24 --tp 3 on NVLink domains of 8 GPUs \(dgx-h100\).*divides 8"):
        simulate_llm(spec, ParallelConfig(num_gpus=24, tp=3, gbs=24, seq=2049, sequence_parallel=False), cluster)
    with pytest.raises(ValueError, match="--gpus 96 as TP2 PP8 CP1 DP6 on servers of 8 GPUs .* a dp group of 6"):
        simulate_llm(spec, ParallelConfig(num_gpus=96, tp=2, pp=8, gbs=96, seq=2048), cluster)
