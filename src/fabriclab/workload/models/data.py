"""Synthetic batches and the training loss of every zoo model, for the profiler and the trainers.

Images are standard-normal pixels with uniform random labels over 1000 classes (tf_cnn_benchmarks'
synthetic data); BERT gets uniform random token ids and a synthetic loss (mean square of the sequence
and pooled outputs) so that every parameter receives a gradient without a pre-training head.

Try it: `python -c "from fabriclab.workload.models.data import synthetic_batch; print([t.shape for t in synthetic_batch('resnet50', 2)])"`.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.nn import functional as F

from fabriclab.workload.zoo import TOKENS, get_spec, input_shape

NUM_CLASSES = 1000
VOCAB_SIZE = 30522  # bert-base-uncased


def synthetic_batch(name: str, batch_size: int, *, input_size: int | None = None,
                    device: str | torch.device = "cpu", seed: int = 0) -> tuple[Tensor, Tensor]:
    """(inputs, targets) for one step of `name`; the same seed gives the same batch."""
    spec = get_spec(name)
    shape = input_shape(name, batch_size, input_size)
    generator = torch.Generator().manual_seed(seed)
    if spec.input_kind == TOKENS:
        inputs = torch.randint(0, VOCAB_SIZE, shape, generator=generator)
    else:
        inputs = torch.randn(shape, generator=generator)
    targets = torch.randint(0, NUM_CLASSES, (batch_size,), generator=generator)
    return inputs.to(device), targets.to(device)


def training_loss(name: str, output, targets: Tensor) -> Tensor:
    """The scalar loss of `name`'s training-mode `output`: cross-entropy on the logits plus the
    weighted auxiliary losses; for BERT the synthetic mean-square loss."""
    spec = get_spec(name)
    if spec.input_kind == TOKENS:
        sequence, pooled = output
        return sequence.float().square().mean() + pooled.float().square().mean()
    if isinstance(output, tuple):
        main, *aux = output
        return F.cross_entropy(main, targets) + spec.aux_loss_weight * sum(
            F.cross_entropy(logits, targets) for logits in aux)
    return F.cross_entropy(output, targets)
