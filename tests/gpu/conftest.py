"""GPU tests are marked `gpu` and skip with the reason "needs a CUDA GPU" where torch sees none, so CI
stays CPU-only and green. On a GPU machine: `python -m pytest -m gpu -s` (the figures are printed)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def fabriclab(*args: str, timeout_s: float = 600) -> subprocess.CompletedProcess:
    """`python -m fabriclab ARGS...` (the CLI as a user runs it), output captured."""
    return subprocess.run([sys.executable, "-m", "fabriclab", *args], capture_output=True, text=True,
                          timeout=timeout_s)


@pytest.fixture(name="fabriclab")
def fabriclab_fixture():
    return fabriclab


@pytest.fixture
def two_gpus():
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two CUDA GPUs (NCCL takes one GPU per rank)")
