"""What the LLM plan says of the network: each row's split, the runner-up (the same as the exhaustive
search's second best), ties and why, the PCIe cap; the search fixed or bounded (--tp/--pp/--ep/--zero),
--efficiency, and the memory check `whatif llm` makes."""

from fractions import Fraction

import pytest

from fabriclab.fabric.presets import cluster_preset
from fabriclab.plan.llm import LlmPlanRequest, run_llm_plan
from fabriclab.plan.llm.cluster import pcie_cap, vary_cluster
from fabriclab.plan.llm.report import HIDDEN_SHARE, TIE_REL, tie_lines
from fabriclab.plan.llm.space import SearchBounds, enumerate_configs, fit_configs, memory_needs
from fabriclab.workload.transformer import load_model

H100 = cluster_preset("dgx-h100")


def request(model="llama3-8b", gpus=(64,), **kw):
    kw.setdefault("gbs", 256)
    kw.setdefault("seq", 4096)
    return LlmPlanRequest(model=model, gpus=gpus, clusters=(("dgx-h100", H100),), **kw)


def test_rows_carry_the_split_and_the_runner_up_of_the_exhaustive_search():
    fast = run_llm_plan(request())
    full = run_llm_plan(request(exhaustive=True))
    (row,), (every,) = fast.rows, full.rows
    steps = sorted(c["step_time_s"] for c in full.configs)
    assert row["step_time_s"] == pytest.approx(steps[0]) and row["runner_up_step_s"] == pytest.approx(steps[1])
    assert row["runner_up"] == every["runner_up"] and row["runner_up_slower"] >= 0
    assert fast.stats["num_simulated"] < full.stats["num_simulated"]  # the bound still prunes
    split = row["split_s"]
    assert set(split) >= {"compute", "tp", "cp", "ep", "pp", "dp", "bubble"}
    assert sum(split.values()) == pytest.approx(row["step_time_s"], rel=1e-6)


def test_bounds_fix_or_bound_the_search():
    spec = load_model("llama3-70b")
    every = enumerate_configs(spec, 256, 8, gbs=256, seq=4096)
    fixed = enumerate_configs(spec, 256, 8, gbs=256, seq=4096, bounds=SearchBounds(tp=(4,)))
    assert fixed and {p.tp for p in fixed} == {4} and len(fixed) < len(every)
    ranged = enumerate_configs(spec, 256, 8, gbs=256, seq=4096, bounds=SearchBounds(pp=tuple(range(2, 9))))
    assert {p.pp for p in ranged} == {p.pp for p in every} & set(range(2, 9))
    zero = enumerate_configs(spec, 256, 8, gbs=256, seq=4096, bounds=SearchBounds(tp=(8,), pp=(4,), zero=(0, 2)))
    assert {p.zero for p in zero} == {0, 2}  # stages the default search does not try, with PP too
    assert SearchBounds(tp=(2, 4, 8), zero=(1,)).describe() == "--tp 2,4,8 --zero 1"
    result = run_llm_plan(request(bounds=SearchBounds(tp=(2,), pp=(2,))))
    assert all((c["tp"], c["pp"]) == (2, 2) for c in result.configs)
    with pytest.raises(ValueError, match="no parallel configuration the frameworks allow has --tp 3"):
        run_llm_plan(request(bounds=SearchBounds(tp=(3,))))


def test_efficiency_is_a_share_of_peak_for_every_cluster():
    low, high = (run_llm_plan(request(efficiency=e)).rows[0] for e in (0.3, 0.6))
    assert low["efficiency"] == 0.3 and "given (--efficiency)" in low["efficiency_source"]
    assert high["tokens_per_s"] > low["tokens_per_s"]


def test_the_plan_checks_memory_as_whatif_llm_does_and_prefers_a_sure_fit():
    spec = load_model("llama3-8b")
    space = enumerate_configs(spec, 64, 8, gbs=2048, seq=8192)
    needs = memory_needs(spec, space)
    gpu = H100.compute.gpu.memory_bytes
    fitted = fit_configs(space, needs, gpu)
    assert fitted.configs and all(m.fit is not None and m.fit.warning is None for _, m in fitted.configs)
    # with no reserve more fit, among them some the default reserve refuses or warns about
    loose = fit_configs(space, needs, gpu, reserve_bytes=0)
    assert len(loose.configs) > len(fitted.configs)
    # a GPU so small that only marginal ones remain: they are kept, each with its warning
    smallest = min(m.total_bytes for m in needs)
    marginal = fit_configs(space, needs, smallest + 4e9 - 1e6)
    assert marginal.configs and all(m.fit.warning for _, m in marginal.configs)


def _row(i, step, **split):
    return {"gpus": 64, "step_time_s": step, "split_s": {"compute": step, **split}, "option": f"o{i}"}


def test_tie_lines_say_when_the_network_is_hidden():
    hidden = [_row(1, 10.0, dp=0.01), _row(2, 10.0 * (1 + TIE_REL / 2), dp=0.02), _row(3, 11.0)]
    (line,) = tie_lines(hidden)
    assert line.startswith("at 64 GPUs options #1, #2 tie") and "because the network is hidden" in line
    inside = [_row(1, 10.0, tp=2 * HIDDEN_SHARE * 10), _row(2, 10.0, tp=2 * HIDDEN_SHARE * 10)]
    assert "network between the servers is hidden" in tie_lines(inside)[0] and "TP's" in tie_lines(inside)[0]
    exposed = [_row(1, 10.0, dp=1.0), _row(2, 10.0, dp=1.0)]
    assert "10.0% of a step is exposed" in tie_lines(exposed)[0]
    assert tie_lines([_row(1, 10.0), _row(2, 10.0 * (1 + 2 * TIE_REL))]) == []


def test_the_pcie_cap_is_said_where_it_binds():
    assert pcie_cap(H100) is None  # 400G behind PCIe Gen5 x16
    fast = vary_cluster(H100, nic_rate_Bps=100e9)
    line = pcie_cap(fast, "dgx-h100 rail 800G")
    assert line.startswith("dgx-h100 rail 800G: each 800 Gb/s NIC runs at most 461 Gb/s")
    result = run_llm_plan(request(nic_rates_Bps=(50e9, 100e9)))
    assert result.pcie == [line]


def test_vary_cluster_checks_what_it_is_given():
    c = vary_cluster(H100, fabric="fat-tree", bisection=Fraction(1, 4))
    assert c.network.fabric == "fat-tree" and c.network.bisection == 0.25 and c.server == H100.server
    with pytest.raises(ValueError, match="rail or fat-tree"):
        vary_cluster(H100, fabric="torus")
    with pytest.raises(ValueError, match=r"in \(0, 1\]"):
        vary_cluster(H100, bisection=2)
