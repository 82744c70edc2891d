"""Every zoo model has exactly the parameters of its reference implementation.

Models are built on torch's `meta` device (shapes only, instant); the profiler tests build them on
the CPU. Where a reference number is not published (the variants torchvision does not ship a
checkpoint for), it is derived below from a published one and the layer-by-layer arithmetic.
"""

import pytest
import torch

from fabriclab.workload.models import get_model
from fabriclab.workload.profile import load_profile
from fabriclab.workload.zoo import list_models

# torchvision's weight metadata, "num_params" (torchvision/models/<family>.py, `*_Weights.IMAGENET1K_V1`,
# 1000 classes); the same numbers are on pytorch.org/vision/stable/models.html.
TORCHVISION = {
    "resnet50": 25_557_032,     # ResNet50_Weights; torchvision's resnet50 is v1.5
    "resnet101": 44_549_160,    # ResNet101_Weights
    "vgg16": 138_357_544,       # VGG16_Weights
    "vgg16_bn": 138_365_992,    # VGG16_BN_Weights
    "alexnet": 61_100_840,      # AlexNet_Weights
    "googlenet": 6_624_904,     # GoogLeNet_Weights: the checkpoint is loaded, then the aux heads dropped
    "inception_v3": 27_161_264,  # Inception_V3_Weights: counted with its auxiliary head (aux_logits=True)
}
# torchvision's GoogLeNet InceptionAux(in): 1x1 conv to 128 (no bias) + batch norm, fc 2048 -> 1024, fc 1024 -> 1000.
GOOGLENET_AUX = {in_ch: in_ch * 128 + 2 * 128 + (2048 * 1024 + 1024) + (1024 * 1000 + 1000) for in_ch in (512, 528)}
# torchvision's Inception v3 InceptionAux(768): 1x1 conv 768 -> 128 + BN, 5x5 conv 128 -> 768 + BN, fc 768 -> 1000.
INCEPTION_AUX = (768 * 128 + 2 * 128) + (128 * 768 * 25 + 2 * 768) + (768 * 1000 + 1000)
# HuggingFace bert-base-uncased `BertModel` (with pooler): 109,482,240, the figure `model.num_parameters()`
# gives; layer by layer: embeddings (30522 + 512 + 2) x 768 + LayerNorm 2 x 768, 12 layers of
# 4 x (768 x 768 + 768) attention + 2 x 768 LayerNorm + (768 x 3072 + 3072) + (3072 x 768 + 768) + 2 x 768,
# pooler 768 x 768 + 768.
BERT_BASE = ((30522 + 512 + 2) * 768 + 2 * 768
             + 12 * (4 * (768 * 768 + 768) + 2 * 768 + (768 * 3072 + 3072) + (3072 * 768 + 768) + 2 * 768)
             + 768 * 768 + 768)

REFERENCE = {
    "alexnet": TORCHVISION["alexnet"],
    "googlenet": TORCHVISION["googlenet"],
    "googlenet_aux": TORCHVISION["googlenet"] + sum(GOOGLENET_AUX.values()),
    "inception_v3": TORCHVISION["inception_v3"] - INCEPTION_AUX,
    "inception_v3_aux": TORCHVISION["inception_v3"],
    "resnet50": TORCHVISION["resnet50"],  # v1 and v1.5 differ only in which conv has the stride
    "resnet50_v1.5": TORCHVISION["resnet50"],
    "resnet101": TORCHVISION["resnet101"],
    "vgg16": TORCHVISION["vgg16"],
    "vgg16_bn": TORCHVISION["vgg16_bn"],
    "bert_base": BERT_BASE,
}


def num_params(name: str, **kwargs) -> int:
    with torch.device("meta"):
        return sum(p.numel() for p in get_model(name, **kwargs).parameters())


def test_derived_references_are_the_known_figures():
    assert REFERENCE["googlenet_aux"] == 13_004_888
    assert REFERENCE["inception_v3"] == 23_834_568
    assert BERT_BASE == 109_482_240


def test_every_zoo_model_has_a_reference():
    assert sorted(REFERENCE) == sorted(list_models())


@pytest.mark.parametrize("name", list_models())
def test_parameter_count_is_exact(name):
    assert num_params(name) == REFERENCE[name]


def test_variants_keep_their_counts():
    assert num_params("resnet101", stride_on_3x3=True) == TORCHVISION["resnet101"]
    assert num_params("resnet50", num_classes=10) == TORCHVISION["resnet50"] - 2049 * 990
    per_layer = 4 * (768 * 768 + 768) + 2 * 768 + (768 * 3072 + 3072) + (3072 * 768 + 768) + 2 * 768
    assert num_params("bert_base", num_layers=1) == BERT_BASE - 11 * per_layer


@pytest.mark.parametrize("zoo_name, reference", [("resnet50_v1.5", "resnet50"), ("resnet101", "resnet101"),
                                                 ("vgg16_bn", "vgg16")])
def test_parameter_tensors_match_seed_004_logs(zoo_name, reference):
    # Seed 004's .bk.log has one row per parameter tensor with its bytes (its vgg16 is vgg16_bn).
    logged = sorted(g.size_bytes for g in load_profile(reference).grads)
    with torch.device("meta"):
        ours = sorted(p.numel() * 4 for p in get_model(zoo_name).parameters())
    assert ours == logged


def test_unknown_model_lists_the_known_ones():
    with pytest.raises(ValueError, match="unknown model 'resnet18'; known models: alexnet, .*bert_base"):
        get_model("resnet18")


@pytest.mark.parametrize("name, kwargs, message", [
    ("resnet50", {"depth": 34}, "depth 34"), ("vgg16", {"num_classes": 0}, "num_classes"),
    ("bert_base", {"num_layers": 0}, "num_layers")])
def test_bad_builder_arguments(name, kwargs, message):
    with pytest.raises(ValueError, match=message):
        get_model(name, **kwargs)
