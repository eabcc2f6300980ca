"""The model zoo (issue 29): every model's layer list, built from its architecture, adds up
to the parameters and multiply-adds its source publishes, within the tolerance its catalog
entry states (and says why where it is loose)."""

import pytest

from simdist.base.errors import InvalidArgumentError, NotFoundError
from simdist.models import CATALOG, model_named, table, zoo_model
from simdist.models.layer import BACKWARD_PER_FORWARD

REQUIRED = ("mobilenet_v2", "resnet50", "resnet101", "vgg16", "inception_v3", "bert_base",
            "gpt3_small")
MATMULS = ("conv2d", "dense", "attention")


def relative(got, published):
    return abs(got - published) / published


@pytest.mark.parametrize("name", list(CATALOG))
def test_layers_add_up_to_the_published_totals(name):
    model, published = zoo_model(name), CATALOG[name].published
    assert relative(model.params, published.params) <= published.params_tolerance, \
        (name, model.params, published.params)
    macs = sum(layer.flops for layer in model.layers if layer.kind in MATMULS) / 2
    assert relative(macs, published.macs) <= published.macs_tolerance, (name, macs)
    assert published.source and (published.macs_tolerance <= 0.03 or published.note)


def test_the_zoo_has_the_issues_models_and_torchvisions_exact_counts():
    assert set(REQUIRED) <= set(CATALOG)
    exact = {"resnet50": 25_557_032, "resnet101": 44_549_160, "vgg16": 138_357_544,
             "mobilenet_v2": 3_504_872, "bert_base": 109_482_240,
             "inception_v3": 27_161_264 - 3_326_696}  # torchvision's, less its aux head
    for name, params in exact.items():
        assert zoo_model(name).params == params, name


def test_every_layer_has_costs_and_the_totals_are_their_sums():
    for name in CATALOG:
        model = zoo_model(name)
        assert len({layer.name for layer in model.layers}) == len(model.layers), name
        assert all(layer.params >= 0 and layer.flops >= 0 and layer.activation_bytes > 0
                   for layer in model.layers), name
        assert model.forward_flops == sum(layer.flops for layer in model.layers)
        assert model.training_flops == (1 + BACKWARD_PER_FORWARD) * model.forward_flops
        assert model.input_bytes > 0


def test_resnet50_shapes_follow_the_paper():
    layers = {layer.name: layer for layer in zoo_model("resnet50").layers}
    assert layers["conv1_conv"].activation_bytes == 112 * 112 * 64 * 4
    assert layers["conv2_block1_add"].activation_bytes == 56 * 56 * 256 * 4
    assert layers["conv5_block3_add"].activation_bytes == 7 * 7 * 2048 * 4
    assert layers["predictions"].params == 2048 * 1000 + 1000
    # forward and backward of one example: about the 23e9 data_parallel's help quotes
    assert 22e9 < zoo_model("resnet50").training_flops < 24e9


def test_gradients_come_last_layer_first_and_fuse_into_buckets():
    model = zoo_model("resnet101")
    gradients = model.gradients()
    assert gradients[0].layer == "predictions" and gradients[-1].layer == "conv1_conv"
    assert sum(g.nbytes for g in gradients) == 4 * model.params
    assert sum(g.nbytes for g in model.gradients("float16")) == 2 * model.params
    buckets = model.gradient_buckets(25_000_000)
    assert [name for b in buckets for name in b.layers] == [g.layer for g in gradients]
    assert sum(b.nbytes for b in buckets) == 4 * model.params
    assert all(b.nbytes >= 25_000_000 for b in buckets[:-1])
    assert len(model.gradient_buckets(0)) == len(gradients)
    assert len(model.gradient_buckets(10**12)) == 1
    with pytest.raises(InvalidArgumentError, match="-1"):
        model.gradient_buckets(-1)


def test_names_are_forgiving_and_an_unknown_one_lists_the_zoo():
    assert model_named("ResNet-101") is zoo_model("resnet101")
    assert model_named("transformer_lm").name == "gpt3_small"
    with pytest.raises(NotFoundError, match="'resnet9000'.*resnet101"):
        model_named("resnet9000")


def test_table_lists_every_model_with_params_gflops_activations():
    text = table()
    assert "params" in text and "GFLOPs" in text and "activ. MB" in text
    for name in CATALOG:
        assert name in text
    assert "25.6M" in text and "44.5M" in text
