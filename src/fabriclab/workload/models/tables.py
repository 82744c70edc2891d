"""Generate the zoo's layer tables (`fabriclab/workload/tables/*.json`) from the torch models.

The model is built on torch's `meta` device (shapes only: no memory, no arithmetic), run forward once
in training mode at batch 2 with hooks on every leaf module, and each leaf's parameters and FLOPs are
recorded in the order of its first call (see `fabriclab.workload.zoo` for the FLOP convention). Batch
2, not 1: batch norm in training mode needs more than one value per channel (Inception v3's auxiliary
head reaches 1x1); FLOPs are per sample, the batch-2 count halved.

Try it: `python -m fabriclab.workload.models.tables` (rewrites the tables; `--check` only compares).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from torch import nn

from fabriclab.workload.models import get_model
from fabriclab.workload.models.bert import AttentionCore
from fabriclab.workload.models.data import synthetic_batch
from fabriclab.workload.zoo import FP32_BYTES, Layer, ModelTable, get_spec, list_models, table_file, table_json

BATCH = 2


def layer_flops(module: nn.Module, inputs: tuple, output) -> int:
    """Forward FLOPs of one call of a leaf module: 2 x multiply-adds of conv, linear, attention."""
    if isinstance(module, nn.Conv2d):
        kernel_h, kernel_w = module.kernel_size
        return 2 * output.numel() * (module.in_channels // module.groups) * kernel_h * kernel_w
    if isinstance(module, nn.Linear):
        return 2 * output.numel() * module.in_features
    if isinstance(module, AttentionCore):
        return module.flops(inputs[0], inputs[1])
    return 0


def leaf_modules(model: nn.Module) -> dict[nn.Module, str]:
    return {module: name for name, module in model.named_modules() if not any(module.children())}


def count_layers(model: nn.Module, inputs, batch_size: int) -> list[Layer]:
    """Leaf modules of `model` in the order of their first call while `model(inputs)` runs, with
    parameters and per-sample forward FLOPs (summed over calls)."""
    names = leaf_modules(model)
    flops: dict[str, int] = {}

    def hook(module, args, output):
        name = names[module]
        flops[name] = flops.get(name, 0) + layer_flops(module, args, output)

    handles = [module.register_forward_hook(hook) for module in names]
    try:
        model(inputs)
    finally:
        for handle in handles:
            handle.remove()
    modules = {name: module for module, name in names.items()}
    layers = []
    for name, total in flops.items():
        assert total % batch_size == 0, (name, total)
        num_params = sum(p.numel() for p in modules[name].parameters(recurse=False))
        layers.append(Layer(name=name, num_params=num_params, param_bytes=num_params * FP32_BYTES,
                            forward_flops=total // batch_size))
    return layers


def build_table(name: str, **model_kwargs) -> ModelTable:
    """`name`'s layer table at its default input size, computed from the torch model."""
    with torch.device("meta"):
        model = get_model(name, **model_kwargs).train()
    inputs, _ = synthetic_batch(name, BATCH, device="meta")
    layers = count_layers(model, inputs, BATCH)
    total = sum(p.numel() for p in model.parameters())
    assert sum(layer.num_params for layer in layers) == total, f"{name}: a parameter's module never ran"
    return ModelTable(model=name, input_shape=tuple(inputs.shape[1:]), layers=tuple(layers))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the stored tables, write nothing")
    parser.add_argument("models", nargs="*", help="models to (re)build (default: the whole zoo)")
    args = parser.parse_args(argv)
    stale = []
    for name in args.models or list_models():
        get_spec(name)
        text = table_json(build_table(name))
        path = Path(str(table_file(name)))
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path}")
    if stale:
        print(f"stale tables: {', '.join(stale)}; run `python -m fabriclab.workload.models.tables`")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
