"""The packaged layer tables equal what the torch models give, load without torch, and their FLOPs
agree with torch's own counter and with torchvision's published figures."""

import json
import subprocess
import sys

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from fabriclab.workload.models import get_model
from fabriclab.workload.models.data import synthetic_batch
from fabriclab.workload.models.tables import BATCH, build_table, main
from fabriclab.workload.zoo import (SPECS, get_spec, input_shape, layer_table, list_models, table_file,
                                    table_from_dict, table_json, table_to_dict)

# torchvision's "_ops" metadata (GFLOPS in its docs: giga multiply-adds per 224x224 or 299x299 image,
# eval mode), from the same `*_Weights` entries as the parameter counts. Ours are 2 x multiply-adds.
TORCHVISION_GMACS = {"resnet50_v1.5": 4.089, "vgg16": 15.47, "vgg16_bn": 15.47, "alexnet": 0.714,
                     "googlenet": 1.498, "inception_v3": 5.713}


@pytest.mark.parametrize("name", list_models())
def test_stored_table_equals_the_torch_model(name):
    assert layer_table(name) == build_table(name), (
        f"{name}'s table drifted from the model; run `python -m fabriclab.workload.models.tables`")


def test_table_check_command_passes():
    assert main(["--check", "alexnet", "vgg16"]) == 0


def test_tables_load_without_torch():
    code = ("import sys\nfrom fabriclab.workload.zoo import layer_table, list_models\n"
            "tables = [layer_table(n) for n in list_models()]\n"
            "assert 'torch' not in sys.modules, 'torch was imported'\nprint(len(tables))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(len(list_models()))


def test_models_registry_module_needs_no_torch():
    code = "import sys, fabriclab.workload.models\nassert 'torch' not in sys.modules\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("name", list_models())
def test_flops_equal_torch_flop_counter(name):
    with torch.device("meta"):
        model = get_model(name).train()
    inputs, _ = synthetic_batch(name, BATCH, device="meta")
    with FlopCounterMode(display=False) as counter:
        model(inputs)
    assert counter.get_total_flops() == BATCH * layer_table(name).forward_flops


@pytest.mark.parametrize("name, gmacs", TORCHVISION_GMACS.items())
def test_flops_match_torchvision(name, gmacs):
    digits = len(str(gmacs).split(".")[1])
    assert round(layer_table(name).forward_flops / 2e9, digits) == gmacs


def test_resnet101_v15_matches_torchvision_and_v1_is_cheaper():
    v15 = build_table("resnet101", stride_on_3x3=True)
    assert round(v15.forward_flops / 2e9, 3) == 7.801  # torchvision ResNet101_Weights "_ops"
    assert layer_table("resnet101").forward_flops < v15.forward_flops
    assert layer_table("resnet50").forward_flops < layer_table("resnet50_v1.5").forward_flops


def test_table_contents():
    table = layer_table("resnet50")
    assert table.input_shape == (3, 224, 224)
    assert table.layers[0].name == "conv1" and table.layers[-1].name == "fc"
    assert table.layers[0].forward_flops == 2 * 64 * 112 * 112 * 3 * 7 * 7
    assert all(layer.param_bytes == 4 * layer.num_params for layer in table.layers)
    assert "GFLOPs" in table.summary()
    assert layer_table("bert_base").input_shape == (128,)
    names = [layer.name for layer in layer_table("inception_v3_aux").layers]
    assert names.index("AuxLogits.fc") < names.index("Mixed_7a.branch3x3_1.conv")


def test_json_form_round_trips():
    table = layer_table("googlenet_aux")
    assert table_from_dict(json.loads(table_json(table))) == table
    assert json.loads(table_json(table)) == table_to_dict(table)
    assert table_file("googlenet_aux").read_text() == table_json(table)


def test_every_table_file_belongs_to_a_model():
    files = sorted(path.name for path in table_file("alexnet").parent.iterdir() if path.name.endswith(".json"))
    assert files == sorted(f"{name}.json" for name in list_models())


@pytest.mark.parametrize("spec", [s for s in SPECS if s.input_kind == "image"], ids=lambda s: s.name)
def test_min_input_size_trains_at_batch_2(spec):
    with torch.device("meta"):
        model = get_model(spec.name).train()
        model(torch.empty(input_shape(spec.name, 2, spec.min_input_size)))


def test_input_shape_and_its_errors():
    assert input_shape("resnet50", 32) == (32, 3, 224, 224)
    assert input_shape("inception_v3", 4) == (4, 3, 299, 299)
    assert input_shape("bert_base", 8) == (8, 128)
    assert input_shape("bert_base", 8, 16) == (8, 16)
    with pytest.raises(ValueError, match="batch size must be >= 1"):
        input_shape("resnet50", 0)
    with pytest.raises(ValueError, match="sequence length 513 is outside 1..512"):
        input_shape("bert_base", 1, 513)
    with pytest.raises(ValueError, match="image side 40 is outside 63"):
        input_shape("alexnet", 1, 40)
    with pytest.raises(ValueError, match="known models: alexnet"):
        layer_table("resnet18")
    assert get_spec("googlenet_aux").aux_loss_weight == 0.3
