"""The model zoo by layers: real networks (MobileNetV2, ResNet-50/101, VGG-16, Inception V3,
BERT-base, a GPT-3 Small transformer LM) as ordered lists of layers with their parameters,
forward FLOPs, activation and input bytes for one example, built from each architecture's
definition and checked against the totals their papers publish (``catalog.py`` cites them);
and a user's own model from a small JSON or TOML file (``loader.py``). What a Keras
``model.summary()`` lists, with the costs a simulator needs.

Pure, like the hardware package: no simulation, no events. May import ``simdist.base`` and
``simdist.hardware`` (units) only.
"""

from simdist.models.catalog import CATALOG, table, zoo_model
from simdist.models.layer import Bucket, Gradient, Layer, Model, Published
from simdist.models.loader import load_model, model_named

__all__ = ["CATALOG", "Bucket", "Gradient", "Layer", "Model", "Published", "load_model",
           "model_named", "table", "zoo_model"]
