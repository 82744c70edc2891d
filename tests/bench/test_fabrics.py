"""The fabric benchmark's configuration, predictions and fabric difference (no root needed)."""

from __future__ import annotations

import pytest

from fabriclab.bench.fabrics import FabricsConfig, fabric_difference, predict, train_argv


@pytest.mark.parametrize("kwargs, message", [
    (dict(compute="resnet50"), "use replay:PROFILE"),
    (dict(compute="replay:nosuchmodel"), "nosuchmodel"),
    (dict(workers=(1, 2)), ">= 2 workers"),
    (dict(fabrics=("10gbe",)), "unknown fabric preset"),
    (dict(algos=("nosuchalgo",)), "nosuchalgo"),
    (dict(steps=0), "steps >= 1"),
    (dict(scale="3"), "fraction in"),
])
def test_bad_config_is_one_clear_error(kwargs, message):
    with pytest.raises(ValueError, match=message):
        FabricsConfig(**kwargs)


def test_predictions_on_both_fabrics():
    config = FabricsConfig(workers=(8,), algos=("ring", "hierarchical:group=2"))
    eth, opa = predict(config, "25gbe", 8, "ring"), predict(config, "100g-opa", 8, "ring")
    profile = config.profile
    for p in (eth, opa):
        # Communication only ever adds to the single-GPU iteration.
        assert p["sim_iteration_s"] >= profile.iteration_s and p["whatif_iteration_s"] >= profile.iteration_s
        assert p["sim_images_per_sec"] == pytest.approx(8 * profile.batch_size / p["sim_iteration_s"])
        # A ring on a non-blocking star is seed 004's closed form (no adds in the simulator: within 1 %).
        assert p["sim_images_per_sec"] == pytest.approx(p["whatif_images_per_sec"], rel=1e-2)
    # 4x the bandwidth exposes less communication.
    assert opa["sim_exposed_s"] < eth["sim_exposed_s"] and opa["sim_images_per_sec"] > eth["sim_images_per_sec"]
    # Chain + binomial moves the whole bucket log2(4) times across leaders: slower than the ring.
    hier = predict(config, "25gbe", 8, "hierarchical:group=2")
    assert hier["sim_iteration_s"] > eth["sim_iteration_s"] * 1.2


def test_fabric_difference_averages_matching_points():
    def row(fabric, workers, algo, v):
        return {"fabric": fabric, "workers": workers, "algo": algo, "images_per_sec": v,
                "sim_images_per_sec": v * 1.1, "whatif_images_per_sec": v}
    rows = [row("25gbe", 2, "ring", 90), row("100g-opa", 2, "ring", 100),
            row("25gbe", 4, "ring", 160), row("100g-opa", 4, "ring", 200),
            row("25gbe", 8, "ring", 1)]  # no Omni-Path twin: left out
    diff = fabric_difference(rows)
    assert diff["points"] == 2 and diff["measured_pct"] == pytest.approx(15.0)
    assert diff["sim_pct"] == pytest.approx(15.0) and diff["whatif_pct"] == pytest.approx(15.0)
    assert fabric_difference([row("25gbe", 2, "ring", 1)]) is None


def test_each_host_trains_with_the_dilated_replay(tmp_path):
    argv = train_argv(FabricsConfig(), 4, "ring", 100.0, tmp_path / "t.json")
    text = " ".join(argv)
    assert "-m fabriclab train --replay resnet50 --dilation 100 --batch-size 128" in text
    assert "--sync allreduce:ring" in text and "--comm-threads 1" in text and "--no-baseline" in text
