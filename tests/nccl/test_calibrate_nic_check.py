"""`calibrate nccl-tests --nic X` on logs that contradict X is refused with the numbers, not fitted badly."""

from pathlib import Path

import pytest

from fabriclab.fabric.links import link_preset
from fabriclab.nccl.calibration import CalibrationRequest, calibrate_cluster
from fabriclab.nccl.logs import read_runs

LOGS = Path(__file__).resolve().parents[2] / "examples" / "nccl-tests-a100"
pytestmark = pytest.mark.skipif(not LOGS.is_dir(), reason=f"shipped nccl-tests logs not at {LOGS}")


def _request(nic: str) -> CalibrationRequest:
    # one server and two: the 16-GPU log decides the NIC (the 2- and 4-GPU logs only made the fit slower)
    runs = tuple(run for n in (8, 16) for run in read_runs(LOGS / f"nccl_{n}.log"))
    return CalibrationRequest(runs=runs, nic=link_preset(nic))


@pytest.mark.parametrize("nic, side", [("NDR", "faster"), ("EDR", "slower")])
def test_a_nic_the_logs_contradict_is_refused_with_numbers(nic, side):
    with pytest.raises(ValueError) as err:
        calibrate_cluster(_request(nic))
    text = str(err.value)
    assert f"contradict --nic {nic}" in text and f"the model {side}" in text
    assert "16 GPUs (2 servers)" in text and "measured" in text and "--nic HDR" in text


def test_the_nic_the_logs_were_measured_on_is_accepted():
    cal = calibrate_cluster(_request("HDR"))
    big = [r for r in cal.residuals if r.num_gpus == 16 and r.size_bytes >= 64 << 20]
    assert big and max(abs(r.error_pct) for r in big) < 20
