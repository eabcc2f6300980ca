"""A user's own model from a small JSON or TOML file (issue 29): its layers or its totals,
counts with k/M/G, sizes with units, and one-line errors naming what is wrong."""

import json

import pytest

from simdist.base.errors import InvalidArgumentError
from simdist.models import load_model, model_named

TOML = """
name = "my_cnn"
input_bytes = "588KiB"

[[layers]]
name = "conv1"
kind = "conv2d"
params = 1728
flops = "173.4M"
activation_bytes = "3MiB"

[[layers]]
name = "fc"
params = "1.025M"
flops = "2.05M"
"""


def test_a_toml_file_of_layers(tmp_path):
    path = tmp_path / "my_cnn.toml"
    path.write_text(TOML)
    model = model_named(str(path))
    assert model.name == "my_cnn" and [layer.name for layer in model.layers] == ["conv1", "fc"]
    assert model.params == 1728 + 1_025_000
    assert model.forward_flops == 173_400_000 + 2_050_000
    assert model.activation_bytes == 3 << 20 and model.input_bytes == 588 << 10
    assert [g.layer for g in model.gradients()] == ["fc", "conv1"]


def test_a_json_file_of_totals_is_one_layer(tmp_path):
    path = tmp_path / "big.json"
    path.write_text(json.dumps({"params": 25e6, "flops": "7.7G", "activation_bytes": "100MB",
                                "input_bytes": 602112}))
    model = load_model(path)
    assert model.name == "big" and len(model.layers) == 1
    assert (model.params, model.forward_flops) == (25_000_000, 7_700_000_000)
    assert model.activation_bytes == 100_000_000 and model.input_bytes == 602112
    assert len(model.gradient_buckets(64 << 20)) == 1


@pytest.mark.parametrize("content, message", [
    ('{"params": 10}', "'params' and 'flops'"),
    ('{"params": 10, "flops": 20, "layers": [{"params": 1, "flops": 2}]}', "not both"),
    ('{"layers": []}', "non-empty list"),
    ('{"layers": [{"params": 1}]}', "layer 1: 'flops' is missing"),
    ('{"layers": [{"params": "lots", "flops": 2}]}', "'lots'"),
    ('{"layers": [{"params": 1.5, "flops": 2}]}', "whole number"),
    ('{"layers": [{"params": 1, "flops": 2, "weights": 3}]}', "unknown key(s) 'weights'"),
    ('{"params": 1, "flops": 2, "input_bytes": "4 parsecs"}', "input_bytes"),
    ('[1, 2]', "expected a table"),
])
def test_bad_files_are_one_line_errors(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(InvalidArgumentError) as error:
        load_model(path)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_bad_toml_and_missing_files(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("name = \n")
    with pytest.raises(InvalidArgumentError, match="not valid TOML"):
        load_model(path)
    with pytest.raises(InvalidArgumentError, match="does not exist"):
        model_named(str(tmp_path / "absent.toml"))
    with pytest.raises(InvalidArgumentError, match=r"\.json or \.toml"):
        load_model(tmp_path / "model.yaml")
