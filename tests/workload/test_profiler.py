"""The profiler on the CPU for every zoo model (small inputs, one repeat), its outputs and its errors.

Each model runs at batch 2 (batch norm in training needs two values per channel on its smallest
maps) and at its smallest input (BERT: 8 tokens); one timed and one hooked iteration, no warm-up;
one CPU thread, which stays fast when other jobs share the cores (two OpenMP threads spinning against
busy neighbours can be many times slower).
"""

import json

import pytest
import torch

from fabriclab.workload.addcost import AddCost, builtin_add_cost
from fabriclab.workload.models import get_model
from fabriclab.workload.profile import Profile, load_profile, read_bk_log, write_bk_log
from fabriclab.workload.profiler import (ADD_SIZES, measure_add_cost, profile_model, resolve_device,
                                         write_add_cost, write_chrome_trace)
from fabriclab.workload.zoo import SPECS, TOKENS, layer_table, list_models


def small_profile(name: str, device: str = "cpu") -> Profile:
    spec = next(s for s in SPECS if s.name == name)
    size = 8 if spec.input_kind == TOKENS else spec.min_input_size
    return profile_model(name, 2, device, warmup=0, repeats=1, input_size=size, num_threads=1)


@pytest.fixture(scope="module")
def resnet_profile() -> Profile:
    return profile_model("resnet50", 2, "cpu", warmup=1, repeats=2, input_size=32, num_threads=1)


@pytest.mark.parametrize("name", list_models())
def test_profiler_on_cpu(name):
    with torch.device("meta"):
        params = dict(get_model(name).named_parameters())
    profile = small_profile(name)
    table = layer_table(name)
    assert profile.model == name and profile.batch_size == 2 and profile.device.startswith("cpu")
    assert profile.iteration_s > 0 and profile.spread_s == 0.0
    # Every parameter tensor's gradient, once, in a non-decreasing order of ready times.
    assert sorted(g.name for g in profile.grads) == sorted(params)
    assert {g.name: g.size_bytes for g in profile.grads} == {n: p.numel() * 4 for n, p in params.items()}
    ready = [g.ready_s for g in profile.grads]
    assert ready == sorted(ready) and ready[0] >= 0
    # The layers are the table's, in the same forward order, with their bytes.
    assert [(layer.name, layer.param_bytes) for layer in profile.layers] == [
        (layer.name, layer.param_bytes) for layer in table.layers]
    assert all(layer.forward_s > 0 for layer in profile.layers)
    assert all(layer.backward_s > 0 for layer in profile.layers if layer.param_bytes)
    assert profile.extra["params_without_grad"] == []
    assert Profile.from_json(profile.to_json()) == profile


def test_threads_are_recorded_and_restored(resnet_profile):
    assert resnet_profile.extra["num_threads"] == 1 and "1 threads" in resnet_profile.device
    before = torch.get_num_threads()
    profile = profile_model("alexnet", 2, warmup=0, repeats=1, input_size=63, num_threads=before + 1)
    assert profile.extra["num_threads"] == before + 1 and torch.get_num_threads() == before


def test_gradients_come_back_to_front(resnet_profile):
    names = [g.name for g in resnet_profile.grads]
    assert names[0].startswith("fc.") and names[-1] in ("conv1.weight", "bn1.weight", "bn1.bias")
    assert resnet_profile.spread_s >= 0 and len(resnet_profile.extra["iteration_samples_s"]) == 2
    timeline = resnet_profile.extra["timeline"]
    assert timeline["backward_offset_s"] > 0
    assert len(timeline["forward_start_s"]) == len(resnet_profile.layers)
    assert timeline["forward_start_s"] == sorted(timeline["forward_start_s"])


def test_json_round_trip(resnet_profile, tmp_path):
    path = tmp_path / "r.json"
    path.write_text(resnet_profile.to_json())
    again = Profile.from_json(path.read_text(), source=str(path))
    assert again == resnet_profile
    assert json.loads(path.read_text())["extra"]["input_shape"] == [3, 32, 32]


def test_bk_log_round_trip(resnet_profile, tmp_path):
    again = read_bk_log(write_bk_log(resnet_profile, tmp_path / "r.bk.log"),
                        iteration_s=resnet_profile.iteration_s, batch_size=2)
    assert [g.size_bytes for g in again.grads] == [g.size_bytes for g in resnet_profile.grads]
    assert [g.ready_s for g in again.grads] == pytest.approx([g.ready_s for g in resnet_profile.grads],
                                                            rel=1e-9, abs=1e-12)
    assert again.model == "r" and again.param_bytes == resnet_profile.param_bytes


def test_chrome_trace(resnet_profile, tmp_path):
    trace = json.loads(write_chrome_trace(resnet_profile, tmp_path / "t.json").read_text())
    events = trace["traceEvents"]
    forward = [e for e in events if e.get("cat") == "forward"]
    backward = [e for e in events if e.get("cat") == "backward"]
    grads = [e for e in events if e.get("cat") == "gradient"]
    assert [e["name"] for e in forward] == [layer.name for layer in resnet_profile.layers]
    assert len(backward) >= sum(1 for layer in resnet_profile.layers if layer.param_bytes)
    assert [e["name"] for e in grads] == [g.name for g in resnet_profile.grads]
    assert all(e["ph"] == "X" and e["dur"] >= 0 for e in forward + backward)
    assert all(e["ph"] == "i" for e in grads)
    # Every gradient is ready after backward started, i.e. after the last forward span began.
    assert min(e["ts"] for e in grads) >= max(e["ts"] for e in forward)


def test_chrome_trace_of_a_bk_log(tmp_path):
    profile = load_profile("vgg16")
    trace = json.loads(write_chrome_trace(profile, tmp_path / "v.json").read_text())
    grads = [e for e in trace["traceEvents"] if e.get("cat") == "gradient"]
    assert len(grads) == 58
    assert grads[-1]["ts"] == pytest.approx(profile.backward_s * 1e6, rel=1e-6)


def test_batch_1_on_a_1x1_map_says_what_to_change():
    with pytest.raises(ValueError, match="batch size of at least 2 or a larger input"):
        profile_model("resnet50", 1, warmup=0, repeats=1, input_size=8)


@pytest.mark.parametrize("kwargs, message", [
    ({"device": "tpu"}, "use cpu, cuda or cuda:N"), ({"warmup": -1}, "warmup >= 0"),
    ({"repeats": 0}, "repeats >= 1"), ({"batch_size": 0}, "batch size must be >= 1"),
    ({"num_threads": 0}, "num_threads >= 1"), ({"input_size": 20}, "image side 20 is outside 63")])
def test_bad_arguments(kwargs, message):
    args = {"name": "alexnet", "batch_size": 2, "input_size": 63, **kwargs}
    with pytest.raises(ValueError, match=message):
        profile_model(**args)


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_cuda_missing_is_a_value_error():
    with pytest.raises(ValueError, match="CUDA is not available here; use --device cpu"):
        resolve_device("cuda")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_profiler_on_cuda():
    profile = small_profile("resnet50_v1.5", "cuda")
    assert profile.device.startswith("cuda (")
    ready = [g.ready_s for g in profile.grads]
    assert len(ready) == 161 and ready == sorted(ready) and profile.iteration_s > 0
    assert measure_add_cost("cuda", [4096, 1 << 20])[1][1] > 0


def test_add_cost_round_trips_through_the_seed_004_format(tmp_path):
    rows = measure_add_cost("cpu", [40, 4096, 1 << 16], min_time_s=0.001)
    assert [size for size, _ in rows] == [40, 4096, 1 << 16]
    assert all(seconds > 0 for _, seconds in rows)
    table = AddCost.from_log(write_add_cost(rows, tmp_path / "add.log"))
    assert table.size_bytes.tolist() == [40, 4096, 1 << 16]
    assert table.seconds.tolist() == [seconds for _, seconds in rows]
    assert (tmp_path / "add.log").read_text().splitlines()[0].startswith("40,")


def test_add_sizes_are_seed_004s():
    assert list(ADD_SIZES) == builtin_add_cost().size_bytes.astype(int).tolist()


def test_add_cost_rejects_partial_floats():
    with pytest.raises(ValueError, match="multiples of 4 bytes"):
        measure_add_cost("cpu", [6])
