"""GPU presets: their data-sheet numbers, the names nccl-tests prints, and the errors."""

import pytest

from fabriclab.fabric.gpus import GPU_PRESET_NAMES, GpuSpec, gpu_for_name, gpu_preset


@pytest.mark.parametrize("name, bf16, fp8, memory, bandwidth", [
    ("a100", 312e12, None, 80e9, 2.039e12),
    ("A100-80GB", 312e12, None, 80e9, 2.039e12),
    ("a100-40gb", 312e12, None, 40e9, 1.555e12),
    ("h100", 989.4e12, 1978.9e12, 81559 * 2**20, 3.35e12),  # nvidia-smi, measured
    ("H200", 989.4e12, 1978.9e12, 141e9, 4.8e12),
    ("b200", 2.25e15, 4.5e15, 180e9, 7.7e12),
    ("v100", 125e12, None, 32e9, 900e9),
])
def test_preset_numbers_are_the_data_sheets_dense_ones(name, bf16, fp8, memory, bandwidth):
    gpu = gpu_preset(name)
    assert gpu.peak_flops["bf16"] == bf16 and gpu.peak_flops.get("fp8") == fp8
    assert gpu.memory_bytes == memory and gpu.memory_bandwidth_Bps == bandwidth and gpu.source


def test_other_precisions():
    a100 = gpu_preset("a100")
    assert a100.peak_flops["fp32"] == 19.5e12 and a100.peak_flops["tf32"] == 156e12
    assert gpu_preset("h200").peak_flops == gpu_preset("h100").peak_flops  # same GH100 compute
    for name in GPU_PRESET_NAMES:  # tensor cores beat CUDA cores, fp8 doubles bf16 where there is one
        gpu = gpu_preset(name)
        assert gpu.peak_flops["bf16"] > gpu.peak_flops["fp32"]
        assert "fp8" not in gpu.peak_flops or gpu.peak_flops["fp8"] == pytest.approx(2 * gpu.peak_flops["bf16"],
                                                                                    rel=1e-3)


def test_a_preset_is_a_copy():
    gpu_preset("h100").peak_flops["bf16"] = 1.0
    assert gpu_preset("h100").peak_flops["bf16"] == 989.4e12


@pytest.mark.parametrize("gpu_name, preset", [
    ("A100-SXM4-40GB", "a100-40gb"), ("NVIDIA A100-SXM4-80GB", "a100-80gb"), ("NVIDIA A100-PCIE-40GB", "a100-40gb"),
    ("H100-SXM5-80GB", "h100"), ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H200", "h200"),
    ("H200-SXM-141GB", "h200"), ("NVIDIA B200", "b200"), ("B200-SXM-180GB", "b200"),
    ("Tesla V100-SXM2-32GB", "v100"), ("Tesla V100-PCIE-32GB", "v100-pcie"),
])
def test_names_as_nccl_tests_prints_them(gpu_name, preset):
    assert gpu_for_name(gpu_name) == gpu_preset(preset)


def test_blackwell_names_each_find_their_own_part():
    # GB200 / GB300 run at 1.2-1.4 kW: 2.5 PFLOP/s dense BF16 against HGX B200 / B300's 2.25 (data sheets)
    assert gpu_for_name("NVIDIA GB200").name == "GB200-B200-186GB"
    assert gpu_for_name("NVIDIA GB300").peak_flops["bf16"] == 2.5e15
    assert gpu_for_name("NVIDIA B300 SXM6 AC").memory_bytes == 288e9
    assert gpu_for_name("NVIDIA B200").peak_flops["bf16"] == 2.25e15


def test_v100_16gb_and_unknown_names():
    v100 = gpu_for_name("Tesla V100-SXM2-16GB")
    assert v100.memory_bytes == 16e9 and v100.peak_flops == gpu_preset("v100").peak_flops
    # bf16 on a V100 is its fp16 tensor rate (Volta has no bf16): a bf16 roofline still runs there
    assert gpu_for_name("Tesla V100-PCIE-32GB").peak_flops["bf16"] == 112e12
    for name in ("GPU", "CPU", "NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA H200 NVL", "NVIDIA GH200 480GB",
                 "NVIDIA A100 80GB PCIe", "Tesla V100S-PCIE-32GB", "NVIDIA L40S", ""):
        assert gpu_for_name(name) is None, name


def test_errors_say_what_to_use():
    with pytest.raises(ValueError, match="no GPU preset 'mi300x': use one of .*h100.*b200"):
        gpu_preset("mi300x")
    with pytest.raises(ValueError, match="has no fp8 peak: use one of fp32, tf32, fp16, bf16"):
        gpu_preset("a100").peak("fp8")
    assert gpu_preset("h100").peak("fp8") == 1978.9e12
    with pytest.raises(ValueError, match="peak_flops.bf16 is -1"):
        GpuSpec(name="x", peak_flops={"bf16": -1}, memory_bytes=1, memory_bandwidth_Bps=1, source="")
    with pytest.raises(ValueError, match="precision 'int8'; use fp32"):
        GpuSpec(name="x", peak_flops={"int8": 1e15}, memory_bytes=1, memory_bandwidth_Bps=1, source="")
    with pytest.raises(ValueError, match="memory_bandwidth_Bps is 0"):
        GpuSpec(name="x", peak_flops={"bf16": 1e15}, memory_bytes=1, memory_bandwidth_Bps=0, source="")
