"""The model zoo: each model's layer list, built from its architecture, beside the totals its
source publishes (``Published``), which ``tests/models/test_catalog.py`` checks the layers add
up to. ``model_named("resnet101")`` gives one; ``table()`` lists them all (``simdist run
data_parallel --list-models``).

The papers count "FLOPs" as multiply-adds (MACs); simdist counts 2 FLOPs per multiply-add, so
a model's forward FLOPs are about twice its published figure, plus the element-wise work
(batch norms, activations, pooling, residual adds) that the papers leave out.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

from simdist.base.errors import NotFoundError
from simdist.models.convnets import mobilenet_v2, resnet, vgg16
from simdist.models.inception import inception_v3
from simdist.models.layer import Model, Published
from simdist.models.transformers import TOKEN_ID_BYTES, bert, gpt

IMAGE_224 = 224 * 224 * 3 * 4  # float32 RGB, as the model reads it after preprocessing
IMAGE_299 = 299 * 299 * 3 * 4
KERAS = "Keras Applications table, keras.io/api/applications (parameters)"
TORCHVISION = ("torchvision models table, pytorch.org/vision/stable/models.html ('GFLOPS' "
               "there are multiply-adds)")
KAPLAN = ("Kaplan et al. 2020, 'Scaling Laws for Neural Language Models', Table 1: forward "
          "C = 2N + 2 n_layer n_ctx d_model per token (N = 12 n_layer d_model^2)")


@dataclass(frozen=True)
class Entry:
    """A zoo model: how to build its layers, one line about it, its input, its sources."""

    name: str
    summary: str
    build: Callable
    input_bytes: int
    published: Published


def _kaplan_macs(layers: int, d: int, tokens: int, vocab: int = 0) -> float:
    """Kaplan et al.'s forward count as multiply-adds for one sequence (with the
    de-embedding when ``vocab``)."""
    return tokens * (12 * layers * d * d + layers * tokens * d + d * vocab)


ENTRIES = (
    Entry("mobilenet_v2", "MobileNetV2 1.0, 224x224 (Sandler et al. 2018)", mobilenet_v2,
          IMAGE_224, Published(
              3.4e6, 300e6, "Sandler et al. 2018, 'MobileNetV2: Inverted Residuals and "
              "Linear Bottlenecks', Table 4: 3.4M parameters, 300M multiply-adds", 0.04, 0.01,
              "Keras and torchvision build 3,504,872 parameters, as here; the paper's 3.4M is "
              "rounded down")),
    Entry("resnet50", "ResNet-50 v1, 224x224 (He et al. 2016)", lambda: resnet(50),
          IMAGE_224, Published(
              25.6e6, 3.8e9, "He et al. 2016, 'Deep Residual Learning for Image Recognition', "
              f"Table 1: 3.8 x 10^9 FLOPs (multiply-adds); {KERAS}: 25.6M", 0.01, 0.03,
              "the paper's stride in the first 1x1 conv of a stage (Keras's ResNet50); "
              "torchvision's v1.5 moves it to the 3x3: 4.1 GMACs")),
    Entry("resnet101", "ResNet-101 v1, 224x224 (He et al. 2016)", lambda: resnet(101),
          IMAGE_224, Published(
              44.7e6, 7.6e9, "He et al. 2016, Table 1: 7.6 x 10^9 FLOPs (multiply-adds); "
              f"{KERAS}: 44.7M", 0.01, 0.03,
              "Keras's 44.7M also counts batch norms' moving statistics (non-trainable)")),
    Entry("vgg16", "VGG-16 (configuration D), 224x224 (Simonyan and Zisserman 2015)", vgg16,
          IMAGE_224, Published(
              138e6, 15.47e9, "Simonyan and Zisserman 2015, 'Very Deep Convolutional "
              f"Networks', Table 2: 138M parameters; {TORCHVISION}: 15.47 GMACs", 0.01, 0.01)),
    Entry("inception_v3", "Inception V3, 299x299 (Szegedy et al. 2016)", inception_v3,
          IMAGE_299, Published(
              23.9e6, 5.71e9, "Szegedy et al. 2016, 'Rethinking the Inception Architecture', "
              f"abstract: 5 billion multiply-adds, under 25M parameters; {KERAS}: 23.9M; "
              f"{TORCHVISION}: 5.71 GMACs", 0.01, 0.01,
              "without the auxiliary classifier (torchvision's 27.2M parameters include its "
              "3.3M)")),
    Entry("bert_base", "BERT-base encoder, 128 tokens (Devlin et al. 2019)", bert,
          3 * 128 * TOKEN_ID_BYTES, Published(
              110e6, _kaplan_macs(12, 768, 128), "Devlin et al. 2019, 'BERT', section 3: "
              f"BERT-base L=12, H=768, A=12, 110M parameters; FLOPs: {KAPLAN}", 0.01, 0.03,
              "Kaplan's count leaves out the attention-weighted sum of V and the biases")),
    Entry("gpt3_small", "GPT-3 Small transformer LM, 2,048 tokens (Brown et al. 2020)", gpt,
          2048 * TOKEN_ID_BYTES, Published(
              125e6, _kaplan_macs(12, 768, 2048, 50257), "Brown et al. 2020, 'Language "
              "Models are Few-Shot Learners', Table 2.1: GPT-3 Small 125M parameters, "
              f"n_layers 12, d_model 768, n_heads 12, n_ctx 2048; FLOPs: {KAPLAN}, plus the "
              "de-embedding 2 d_model n_vocab", 0.01, 0.15,
              "Kaplan's count has QK^T but not the attention-weighted sum of V, as large "
              "(n_layer n_ctx d_model multiply-adds a token: 14% here at 2,048 tokens)")),
)
#: the zoo by name
CATALOG = {entry.name: entry for entry in ENTRIES}
#: other names a model answers to
ALIASES = {"transformer_lm": "gpt3_small", "bert": "bert_base", "mobilenetv2": "mobilenet_v2",
           "inceptionv3": "inception_v3"}


def _key(name: str) -> str:
    return name.lower().replace("-", "").replace("_", "")


_BY_KEY = {_key(n): n for n in [*CATALOG, *ALIASES]}


def is_zoo_model(name: str) -> bool:
    return isinstance(name, str) and _key(name) in _BY_KEY


def zoo_model(name: str) -> Model:
    """The zoo's model ``name`` (``resnet101``, ``ResNet-101``, ``transformer_lm``...)."""
    if not is_zoo_model(name):
        raise NotFoundError(f"model {name!r} is not in the zoo: expected one of "
                            f"{', '.join(CATALOG)} (or a .json or .toml model file)")
    found = _BY_KEY[_key(name)]
    return _built(ALIASES.get(found, found))


@functools.lru_cache(maxsize=None)
def _built(name: str) -> Model:
    entry = CATALOG[name]
    return Model(entry.name, entry.summary, tuple(entry.build().layers), entry.input_bytes,
                 entry.published)


def table() -> str:
    """The zoo, one line a model: parameters, forward GFLOPs, activation and input sizes."""
    lines = [f"{'model':<14}{'params':>9}{'GFLOPs':>9}{'activ. MB':>11}{'input KB':>10}"
             f"{'layers':>8}  about"]
    for name in CATALOG:
        model = zoo_model(name)
        lines.append(f"{name:<14}{model.params / 1e6:>8.1f}M{model.forward_flops / 1e9:>9.2f}"
                     f"{model.activation_bytes / 1e6:>11.1f}{model.input_bytes / 1e3:>10.1f}"
                     f"{len(model.layers):>8}  {model.summary}")
    lines.append("GFLOPs: forward, one example, 2 per multiply-add (training: 3x); activ.: "
                 "every layer's float32 output for one example")
    return "\n".join(lines)
