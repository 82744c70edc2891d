"""The model zoo as pure data: which models exist, their inputs, and their layer tables.

Each model's layer table lists every leaf module (a module without children) in the order of its first
call in a training-mode forward pass: name, parameter count, parameter bytes (fp32) and forward FLOPs
per sample. The tables are JSON files in `tables/`, generated from the torch models in
`fabriclab.workload.models` by `python -m fabriclab.workload.models.tables`; a test rebuilds them and
checks that they did not drift. Standard library only: reading a table never imports torch.

FLOP convention: 2 x multiply-adds of convolutions, fully connected layers and attention matmuls
(QK^T and attention x V), biases, normalisation, activations, pooling and embedding look-ups counted
as 0. This is the convention of `torch.utils.flop_counter`; torchvision's `_ops` (GFLOPS in its docs)
are the multiply-adds alone, i.e. half of these numbers.

Try it: `python -c "from fabriclab.workload.zoo import layer_table; print(layer_table('resnet50').summary())"`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib import resources

FP32_BYTES = 4
IMAGE, TOKENS = "image", "tokens"


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """How to build one zoo model and what it eats."""

    name: str
    """Zoo name, e.g. `resnet50_v1.5`."""
    family: str
    """Module under `fabriclab.workload.models` whose `build(**kwargs)` makes it, e.g. `resnet`."""
    kwargs: dict = field(default_factory=dict)
    """Keyword arguments for `build`, e.g. `{"depth": 50}`."""
    input_kind: str = IMAGE
    """`image` (N x 3 x H x W floats) or `tokens` (N x sequence length token ids)."""
    input_size: int = 224
    """Default image side in pixels, or sequence length in tokens."""
    min_input_size: int = 32
    """Smallest input size that trains at batch 2 (tests use it to run fast)."""
    max_input_size: int = 4096
    """Largest input size (BERT: its 512 learned positions)."""
    aux_loss_weight: float = 0.0
    """Weight of each auxiliary classifier's loss in training (0: no auxiliary heads)."""
    description: str = ""
    """One line for `fabriclab models`."""


# Minimum input sizes: the smallest that runs in training mode at batch 2 (checked by a test). Batch
# norm in training needs more than one value per channel, so at batch 1 some models need more
# (Inception v3 with its auxiliary head: 347; ResNets: 33). torchvision's eval-mode `min_size`
# metadata agrees where batch norm does not bind: 63 for AlexNet, 75 for Inception v3, 15 for GoogLeNet.
SPECS: tuple[ModelSpec, ...] = (
    ModelSpec(name="alexnet", family="alexnet", min_input_size=63,
              description="AlexNet, torchvision's single-tower variant (Krizhevsky 2014)"),
    ModelSpec(name="googlenet", family="googlenet", min_input_size=15,
              description="GoogLeNet / Inception v1, torchvision layout, no auxiliary heads"),
    ModelSpec(name="googlenet_aux", family="googlenet", kwargs={"aux_logits": True}, min_input_size=15,
              aux_loss_weight=0.3, description="GoogLeNet with its two auxiliary classifiers"),
    ModelSpec(name="inception_v3", family="inception", input_size=299, min_input_size=75,
              description="Inception v3 (299x299), no auxiliary head"),
    ModelSpec(name="inception_v3_aux", family="inception", kwargs={"aux_logits": True}, input_size=299,
              min_input_size=299, aux_loss_weight=0.4, description="Inception v3 with its auxiliary head"),
    ModelSpec(name="resnet50", family="resnet", kwargs={"depth": 50}, min_input_size=8,
              description="ResNet-50 v1 (He et al. 2015: stride on the first 1x1 conv of a block)"),
    ModelSpec(name="resnet50_v1.5", family="resnet", kwargs={"depth": 50, "stride_on_3x3": True}, min_input_size=8,
              description="ResNet-50 v1.5 (stride on the 3x3 conv; torchvision's resnet50)"),
    ModelSpec(name="resnet101", family="resnet", kwargs={"depth": 101}, min_input_size=8,
              description="ResNet-101 v1 (stride_on_3x3=True gives torchvision's resnet101)"),
    ModelSpec(name="vgg16", family="vgg", description="VGG-16 (configuration D), no batch norm"),
    ModelSpec(name="vgg16_bn", family="vgg", kwargs={"batch_norm": True},
              description="VGG-16 with batch norm (Zhang et al.'s `vgg16`)"),
    # 128 tokens: BERT's pre-training runs 90% of its steps at sequence length 128 (Devlin et al.
    # 2019, appendix A.2); 512 is the number of learned positions.
    ModelSpec(name="bert_base", family="bert", input_kind=TOKENS, input_size=128, min_input_size=1,
              max_input_size=512,
              description="BERT-base encoder + pooler (12 x 768, HuggingFace bert-base-uncased)"),
)
_BY_NAME = {spec.name: spec for spec in SPECS}


def list_models() -> list[str]:
    """Zoo names in table order."""
    return [spec.name for spec in SPECS]


def get_spec(name: str) -> ModelSpec:
    """The spec of `name`; a ValueError lists the known names for an unknown one."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; known models: {', '.join(list_models())}") from None


def input_shape(name: str, batch_size: int, input_size: int | None = None) -> tuple[int, ...]:
    """Shape of one batch of `name`'s input: (N, 3, H, W) images or (N, L) token ids."""
    spec = get_spec(name)
    if batch_size < 1:
        raise ValueError(f"batch size must be >= 1, got {batch_size}")
    size = spec.input_size if input_size is None else input_size
    if not spec.min_input_size <= size <= spec.max_input_size:
        what = "sequence length" if spec.input_kind == TOKENS else "image side"
        raise ValueError(f"{name}: {what} {size} is outside {spec.min_input_size}..{spec.max_input_size}; "
                         f"pick a size in that range")
    return (batch_size, size) if spec.input_kind == TOKENS else (batch_size, 3, size, size)


@dataclass(frozen=True, kw_only=True)
class Layer:
    """One leaf module of a model, in forward order."""

    name: str
    """Module name, e.g. `layer1.0.conv1`."""
    num_params: int
    """Parameters owned by this module."""
    param_bytes: int
    """Bytes of those parameters in fp32."""
    forward_flops: int
    """Forward FLOPs per sample at the default input size (2 x multiply-adds, see the module doc)."""


@dataclass(frozen=True, kw_only=True)
class ModelTable:
    """A model's layer table."""

    model: str
    """Zoo name."""
    input_shape: tuple[int, ...]
    """Shape of one sample's input, e.g. (3, 224, 224) or (128,)."""
    layers: tuple[Layer, ...]
    """Leaf modules in forward order."""

    @property
    def num_params(self) -> int:
        return sum(layer.num_params for layer in self.layers)

    @property
    def param_bytes(self) -> int:
        return sum(layer.param_bytes for layer in self.layers)

    @property
    def forward_flops(self) -> int:
        return sum(layer.forward_flops for layer in self.layers)

    def summary(self) -> str:
        return (f"{self.model}: {len(self.layers)} layers, {self.num_params:,} parameters "
                f"({self.param_bytes / 1e6:.2f} MB), {self.forward_flops / 1e9:.3f} GFLOPs per sample forward")


def table_from_dict(data: dict) -> ModelTable:
    """A `ModelTable` from its JSON form (`{"model", "input_shape", "columns", "layers": [rows]}`)."""
    layers = tuple(Layer(name=name, num_params=num_params, param_bytes=param_bytes, forward_flops=flops)
                   for name, num_params, param_bytes, flops in data["layers"])
    return ModelTable(model=data["model"], input_shape=tuple(data["input_shape"]), layers=layers)


def table_to_dict(table: ModelTable) -> dict:
    """The JSON form of a table: one row per layer, columns named once."""
    return {"model": table.model, "input_shape": list(table.input_shape),
            "columns": ["name", "num_params", "param_bytes", "forward_flops"],
            "flops": "2 x multiply-adds of conv, linear and attention matmuls, per sample",
            "generated_by": "python -m fabriclab.workload.models.tables",
            "layers": [[layer.name, layer.num_params, layer.param_bytes, layer.forward_flops]
                       for layer in table.layers]}


def table_json(table: ModelTable) -> str:
    """The stored text of a table: the header indented, one layer per line (diffs stay readable)."""
    data = table_to_dict(table)
    rows = data.pop("layers")
    head = json.dumps(data, indent=1)[:-2]
    body = ",\n".join(f"  {json.dumps(row)}" for row in rows)
    return f'{head},\n "layers": [\n{body}\n ]\n}}\n'


def table_file(name: str):
    """The packaged JSON file of `name`'s layer table (an importlib.resources traversable)."""
    get_spec(name)
    return resources.files("fabriclab.workload") / "tables" / f"{name}.json"


def layer_table(name: str) -> ModelTable:
    """`name`'s layer table, read from the packaged JSON (no torch)."""
    path = table_file(name)
    try:
        return table_from_dict(json.loads(path.read_text()))
    except FileNotFoundError:
        raise ValueError(f"no layer table for {name!r} at {path}; regenerate the tables with "
                         f"`python -m fabriclab.workload.models.tables`") from None
