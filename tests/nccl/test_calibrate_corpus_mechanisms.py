"""What the nccl-tests corpus taught the calibration: the prior's data sheet (HBM rate, PCIe generation)
and leaving rows that NCCL costs by its own estimate (NVLS-tree) out of the fit (nccl/calibration.py,
nccl/fit.py); and srun's prefix read after a leading space (nccl/logs.py)."""

from pathlib import Path

import pytest

from fabriclab.fabric.links import link_preset
from fabriclab.nccl.calibration import CalibrationRequest, calibrate_cluster, datasheet_for, prior_for
from fabriclab.nccl.logs import parse_nccl_tests
from fabriclab.nccl.predict import COSTED

DELL = Path(__file__).resolve().parents[2] / "examples" / "nccl-corpus" / "dell-xe9680-h100-ndr"


def test_the_data_sheet_gives_hopper_pcie5_and_hbm3_and_leaves_unknown_gpus_alone():
    h100 = datasheet_for("NVIDIA H100 80GB HBM3")
    assert h100["memory_bandwidth_Bps"] == pytest.approx(3.35e12) and h100["pcie"].name == "PCIe5x16"
    a100 = datasheet_for("A100-SXM4-40GB")
    assert a100 == {"memory_bandwidth_Bps": pytest.approx(1.555e12)}  # PCIe 4.0: the default
    assert datasheet_for("Some GPU") == {}


def _dell_request(**kw) -> CalibrationRequest:
    text = (DELL / "allreduce_16.log").read_text()
    ranks = "\n".join(f"#  Rank {r:2d} Group  0 Pid 0 on h{r // 8} device {r % 8:2d} [0x00] NVIDIA H100 80GB HBM3"
                      for r in range(16))
    text = text.replace("NCCL version", ranks + "\nNCCL version", 1)
    (run,) = parse_nccl_tests(text, "allreduce_16.log", collective="allreduce")
    return CalibrationRequest(runs=(run,), nic=link_preset("NDR"), nics_per_server=8, check_nic=False, **kw)


def test_nvls_tree_rows_stay_out_of_the_fit():
    request = _dell_request()
    prior = prior_for(list(request.runs), request)
    assert prior.server.pcie_bandwidth_Bps > 50e9 and prior.server.memory_bandwidth_Bps == pytest.approx(1.675e12)
    left_out = calibrate_cluster(request).cluster.fit["parameters"]["server.memory_bandwidth_Bps"]
    fitted = calibrate_cluster(_dell_request(estimates_fit=True)).cluster.fit["parameters"]
    # the 2-server NVLS-tree rows (1 MiB and up) pull the memory pass far below HBM3's when they are fitted
    assert not left_out["fitted"] and left_out["value"] == pytest.approx(left_out["prior"])
    assert fitted["server.memory_bandwidth_Bps"]["fitted"]
    assert fitted["server.memory_bandwidth_Bps"]["value"] < 0.5 * left_out["value"]
    assert "nvls_tree" not in COSTED


def test_without_the_data_sheet_the_prior_is_the_a100_default():
    request = _dell_request(datasheet=False)
    prior = prior_for(list(request.runs), request)
    assert prior.server.pcie_bandwidth_Bps < 30e9 and prior.server.memory_bandwidth_Bps == pytest.approx(0.7775e12)


def test_srun_prefix_after_a_leading_space():
    text = (Path(__file__).resolve().parents[2] / "examples" / "nccl-corpus" / "h100-ndr-node005"
            / "allreduce_16.log").read_text()
    ranks = "\n".join(f" 0: #  Rank {r:2d} Group  0 Pid 0 on n{r // 8} device {r % 8} [0x00] NVIDIA H100 80GB HBM3"
                      for r in range(16))
    text = text.replace(" 0: #\n", " 0: #\n" + ranks + "\n", 1)
    (run,) = parse_nccl_tests(text, "x.log", collective="allreduce")
    assert (run.num_ranks, run.num_servers, len(run.rows)) == (16, 2, 11)
    assert run.rows[-1].busbw_GBps == pytest.approx(155.57) and run.rows[0].error == "N/A"


def test_pat_is_costed_on_the_topology_at_the_share_nccl_gives_it():
    from fabriclab.fabric.cluster import prior_cluster
    from fabriclab.nccl.predict import candidate_times, collective_times

    cluster = prior_cluster(gpus_per_server=1, gpu_name="NVIDIA B200", nic=link_preset("400GbE"),
                            nccl_version="2.26.6", **datasheet_for("NVIDIA B200"))
    size = [1 << 30]
    cand = candidate_times(cluster, 4, size, "allgather")
    _, picks = collective_times(cluster, 2, [2 << 20], "allgather")
    assert picks == ["pat/Simple"]  # as NCCL 2.26 picks for Google's 2-GPU all_gather at 1-4 MiB
    # the same bytes as the ring over the same NICs, at NCCL's PAT share (0.75 from 2.24)
    ratio = cand[("pat", "Simple")][0] / cand[("ring", "Simple")][0]
    assert 1 / 0.75 * 0.97 < ratio < 1 / 0.75 * 1.03
    # never faster than the NICs allow: busbw of a 4-rank all_gather at most 50 GB/s x 3/4 x 0.75
    busbw = (1 << 30) / cand[("pat", "Simple")][0] * 3 / 4
    assert busbw < 50e9 * 0.75


def test_the_ranges_span_the_fits_own_scatter():
    import math

    from fabriclab.nccl.calibration import fit_scatter
    from fabriclab.nccl.fit import Residual

    def row(err: float, held: bool = False, choice: str = "ring/Simple") -> Residual:
        return Residual(source="x", num_gpus=16, size_bytes=1 << 20, choice=choice, measured_busbw_GBps=1.0,
                        predicted_busbw_GBps=1.0, error_pct=err, inplace_error_pct=None, held_out=held)

    expected = math.exp(math.sqrt((math.log(1.1) ** 2 + math.log(0.9) ** 2) / 2))
    # held-out rows and rows NCCL's own estimate costs (NVLS-tree) say nothing about the fit's scatter
    rows = [row(10.0), row(-10.0), row(80.0, held=True), row(50.0, choice="nvls_tree/Simple")]
    assert fit_scatter(rows) == pytest.approx(expected)
    assert fit_scatter([row(5.0, held=True)]) == 1.0
    calibration = calibrate_cluster(_dell_request())
    scatter = calibration.cluster.fit["fit_scatter"]
    assert 1.0 < scatter < 1.5
