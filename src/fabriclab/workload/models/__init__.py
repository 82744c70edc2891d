"""The model zoo in plain torch: one file per family, built by name.

`get_model(name)` builds a zoo model (see `fabriclab.workload.zoo.SPECS` for the names);
`input_shape(name, batch_size)` gives the shape of its input. This package's `__init__` imports no
torch itself (each family module does, when a model is built), so listing the zoo stays light.

Parameter counts equal the reference implementations exactly (torchvision for the CNNs with 1000
classes, HuggingFace `bert-base-uncased` for BERT); `tests/workload/test_param_counts.py` checks them.

Try it: `python -c "from fabriclab.workload.models import get_model; m = get_model('resnet50'); print(sum(p.numel() for p in m.parameters()))"`.
"""

from __future__ import annotations

import importlib

from fabriclab.workload.zoo import get_spec, input_shape, list_models

__all__ = ["get_model", "input_shape", "list_models"]


def get_model(name: str, **kwargs):
    """Build zoo model `name` (a `torch.nn.Module` in training mode); `kwargs` override the spec's
    builder arguments, e.g. `get_model("resnet101", stride_on_3x3=True)` or `num_classes=10`."""
    spec = get_spec(name)
    family = importlib.import_module(f"{__name__}.{spec.family}")
    return family.build(**{**spec.kwargs, **kwargs})
