"""`fabriclab calibrate step`: the job described as `whatif llm` describes it, --gbs required, memory checked,
an implausible share of peak warned about."""

import inspect
import json

import pytest

from fabriclab.cli.calibrate import step as calibrate_step
from fabriclab.cli.calibrate.step import PLAUSIBLE, plausibility_warning
from fabriclab.cli.whatif import llm as whatif_llm
from tests.cli.test_cli_whatif_llm import fabriclab

GPT3 = ["--model", "gpt3-175b", "--cluster", "dgx-h100", "--gpus", "128", "--tp", "4", "--pp", "8", "--vp", "6",
        "--tp-overlap"]


class _Commands:
    """Stands in for the typer app a module's `register(app)` adds its command to: keeps the command's
    function, whose signature (names, defaults) is the command's options, read with `inspect` alone."""

    def __init__(self):
        self.functions = {}

    def command(self, name):
        def keep(fn):
            self.functions[name] = fn
            return fn
        return keep


def _params(module, name):
    """The options of the command `name` that `module.register` adds: parameter name -> inspect.Parameter."""
    commands = _Commands()
    module.register(commands)
    return dict(inspect.signature(commands.functions[name]).parameters)


def test_its_options_and_defaults_are_whatif_llms():
    calibrate, whatif = _params(calibrate_step, "step"), _params(whatif_llm, "llm")
    only_whatif = {"per_stage", "efficiency", "bandwidth", "trace", "trace_stage", "chakra"}
    only_whatif |= {"fabric", "bisection", "nic_rate"}  # the fabric options: a calibration is of a given cluster
    only_whatif |= {"calibrated"}  # another machine's calibration carried: what calibrate step writes
    # the fabric as it runs (routing, QPs, transport, a job's placement and the draws): the cluster file's own
    only_whatif |= {"routing", "qps", "transport", "placement", "busy", "seeds"}
    # goodput: what the cluster's failures cost the job (docs/goodput.md), not what its step measures
    only_whatif |= {"checkpoint_interval", "async_checkpoint", "restart_time", "storage_bandwidth", "failure_rates"}
    assert set(whatif) - set(calibrate) <= only_whatif
    for name in set(whatif) & set(calibrate) - {"gbs"}:
        assert calibrate[name].default == whatif[name].default, name
    required = inspect.Parameter.empty  # no default: typer makes the option required
    assert calibrate["gbs"].default is required and whatif["gbs"].default is not required


def test_gbs_is_required(tmp_path):
    done = fabriclab("calibrate", "step", "--step-time", "3s", "--out", str(tmp_path / "c.json"))
    assert done.returncode == 2 and "Missing option '--gbs'" in done.stderr


@pytest.mark.parametrize("mfu,warned", [(0.10, "below"), (0.5349, None), (0.85, "above")])
def test_plausibility_warning(mfu, warned):
    line = plausibility_warning(mfu, "bf16")
    if warned is None:
        assert line is None
    else:
        assert warned in line and f"{PLAUSIBLE[0]:.0%}-{PLAUSIBLE[1]:.0%}" in line and "--gbs" in line


def test_a_published_step_calibrates_quietly_and_a_wrong_batch_is_warned_about(tmp_path):
    # NVIDIA's GPT-3 175B on 128 H100s: 8.309 s for gbs 256 (shared/reference/llm-published.md), MFU 53.5 %
    done = fabriclab("calibrate", "step", *GPT3, "--gbs", "256", "--step-time", "8.309s", "--out",
                     str(tmp_path / "c.json"), "--json", str(tmp_path / "r.json"))
    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stdout
    results = json.loads((tmp_path / "r.json").read_text())["results"]
    assert results["efficiency_warning"] is None and results["memory_warning"] is None
    # the same time for a quarter of the batch: 13 % of peak, below the band
    done = fabriclab("calibrate", "step", *GPT3, "--gbs", "64", "--step-time", "8.309s", "--out",
                     str(tmp_path / "c.json"))
    assert done.returncode == 0, done.stderr
    assert "warning: the measured step runs at" in done.stdout and "below the 15%-80%" in done.stdout
    assert max(len(line) for line in done.stdout.splitlines() if str(tmp_path) not in line) <= 80


def test_memory_is_checked_with_the_reserve(tmp_path):
    done = fabriclab("calibrate", "step", *GPT3, "--gbs", "256", "--step-time", "8.309s", "--memory-reserve",
                     "10GB", "--out", str(tmp_path / "c.json"))
    assert done.returncode == 0, done.stderr
    assert "warning: memory is marginal" in done.stdout
    done = fabriclab("calibrate", "step", *GPT3, "--gbs", "256", "--step-time", "8.309s", "--memory-reserve",
                     "20GB", "--out", str(tmp_path / "refused.json"))
    assert done.returncode == 2 and "does not fit: needs" in done.stderr and "reserve 21.5 GB" in done.stderr
    assert not (tmp_path / "refused.json").exists()


def test_a_published_throughput_calibrates_as_its_step_time(tmp_path):
    """--tokens-per-s-per-gpu, as published tables give a run: tokens/s/GPU = gbs x seq / step time / GPUs."""
    rate = 256 * 2048 / 8.309 / 128
    records = []
    for given in (["--step-time", "8.309s"], ["--tokens-per-s-per-gpu", f"{rate!r}"]):
        out = tmp_path / f"r{len(records)}.json"
        done = fabriclab("calibrate", "step", *GPT3, "--gbs", "256", *given, "--out", str(tmp_path / "c.json"),
                         "--json", str(out))
        assert done.returncode == 0, done.stderr
        records.append(json.loads(out.read_text()))
    assert records[1]["config"]["step_time_s"] == pytest.approx(8.309, rel=1e-9)
    assert records[1]["results"]["efficiency"] == pytest.approx(records[0]["results"]["efficiency"], rel=1e-6)
    assert records[0]["results"]["host_scale"] == 1.0 and records[0]["config"]["host"] == "te"
    for wrong in ([], ["--step-time", "8.3s", "--tokens-per-s-per-gpu", "500"]):
        done = fabriclab("calibrate", "step", *GPT3, "--gbs", "256", *wrong, "--out", str(tmp_path / "c.json"))
        assert done.returncode != 0 and "one of --step-time" in done.stderr + done.stdout
