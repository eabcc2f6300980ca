"""Building a model's layer list from its architecture, as Keras's functional API builds the
model: ``ConvNet`` follows an image's shape through convolutions, pooling and branches;
``TransformerNet`` a sequence's through embeddings, attention and feed-forward blocks.

Counting rules (the papers' and torchvision's): a convolution or dense layer costs 2 FLOPs per
multiply-add; a batch norm 2 per element (scale, shift) and its ReLU 1 more; a pooling window
one per element it reads; a residual add one per element. Convolutions before a batch norm
have no bias, as in torchvision and TF-slim. Activations are float32.
"""

from __future__ import annotations

from dataclasses import dataclass

from simdist.models.layer import Layer

ACTIVATION_BYTES = 4  # float32


@dataclass(frozen=True)
class Shape:
    """An image's height, width and channels."""

    h: int
    w: int
    c: int

    @property
    def elements(self) -> int:
        return self.h * self.w * self.c


def _out(size: int, k: int, stride: int, padding: str) -> int:
    if padding == "same":
        return -(-size // stride)
    return (size - k) // stride + 1  # "valid"


class ConvNet:
    """An image model's layers, appended as the architecture reads (Keras's ``Conv2D``,
    ``BatchNormalization``, ``MaxPooling2D``, ``Add``, ``Concatenate``, ``Dense``)."""

    def __init__(self, h: int, w: int, c: int, layers: list | None = None):
        self.shape = Shape(h, w, c)
        self.layers = [] if layers is None else layers

    def _add(self, name, kind, params, flops, shape: Shape):
        self.layers.append(Layer(name, kind, int(params), int(flops),
                                 shape.elements * ACTIVATION_BYTES))
        self.shape = shape
        return self

    def conv(self, name, filters, k, stride=1, padding="same", groups=1, bias=False,
             relu=False):
        kh, kw = (k, k) if isinstance(k, int) else k
        s = self.shape
        out = Shape(_out(s.h, kh, stride, padding), _out(s.w, kw, stride, padding), filters)
        fan_in = kh * kw * s.c // groups
        macs = fan_in * out.elements
        return self._add(name, "conv2d", fan_in * filters + (filters if bias else 0),
                         2 * macs + (out.elements if relu else 0), out)

    def depthwise(self, name, k, stride=1):
        """A depthwise 3x3 (Keras's ``DepthwiseConv2D``): one filter per channel."""
        return self.conv(name, self.shape.c, k, stride, groups=self.shape.c)

    def bn(self, name, relu=True):
        e = self.shape.elements
        return self._add(name, "batch_norm", 2 * self.shape.c, (3 if relu else 2) * e,
                         self.shape)

    def conv_bn(self, name, filters, k, stride=1, padding="same", groups=1, relu=True):
        """TF-slim's ``conv2d`` with ``normalizer_fn=batch_norm``: conv, BN, ReLU."""
        self.conv(f"{name}_conv", filters, k, stride, padding, groups)
        return self.bn(f"{name}_bn", relu)

    def pool(self, name, k, stride, padding="valid", kind="max"):
        s = self.shape
        out = Shape(_out(s.h, k, stride, padding), _out(s.w, k, stride, padding), s.c)
        return self._add(name, f"{kind}_pool", 0, k * k * out.elements, out)

    def global_pool(self, name):
        return self._add(name, "global_avg_pool", 0, self.shape.elements,
                         Shape(1, 1, self.shape.c))

    def dense(self, name, units, relu=False):
        fan_in = self.shape.elements
        return self._add(name, "dense", fan_in * units + units,
                         2 * fan_in * units + (units if relu else 0), Shape(1, 1, units))

    def fork(self) -> ConvNet:
        """A branch from the current shape, appending to the same layer list."""
        return ConvNet(self.shape.h, self.shape.w, self.shape.c, self.layers)

    def add(self, name, *branches: ConvNet, relu=True):
        """The residual sum of branches of one shape (Keras's ``Add``), then ReLU."""
        shape = branches[0].shape
        assert all(b.shape == shape for b in branches), [b.shape for b in branches]
        return self._add(name, "add", 0, (len(branches) - 1 + relu) * shape.elements, shape)

    def concat(self, name, *branches: ConvNet):
        """Branches of one height and width side by side (Keras's ``Concatenate``)."""
        h, w = branches[0].shape.h, branches[0].shape.w
        assert all((b.shape.h, b.shape.w) == (h, w) for b in branches)
        return self._add(name, "concat", 0, 0, Shape(h, w, sum(b.shape.c for b in branches)))


class TransformerNet:
    """A transformer's layers over one sequence of ``tokens`` of width ``d`` (Keras's
    ``Embedding``, ``LayerNormalization``, ``MultiHeadAttention``, ``Dense``)."""

    def __init__(self, tokens: int, d: int, heads: int):
        self.n, self.d, self.heads = tokens, d, heads
        self.layers: list[Layer] = []

    def _add(self, name, kind, params, flops, elements):
        self.layers.append(Layer(name, kind, int(params), int(flops),
                                 elements * ACTIVATION_BYTES))
        return self

    def embedding(self, name, rows, add=True):
        """A table of ``rows`` x d looked up per token (added to the running sum if ``add``)."""
        return self._add(name, "embedding", rows * self.d, self.n * self.d if add else 0,
                         self.n * self.d)

    def layer_norm(self, name):
        return self._add(name, "layer_norm", 2 * self.d, 5 * self.n * self.d, self.n * self.d)

    def dense(self, name, units, fan_in=None, bias=True, tokens=None, gelu=False):
        fan_in, tokens = fan_in or self.d, tokens or self.n
        return self._add(name, "dense", fan_in * units + (units if bias else 0),
                         2 * tokens * fan_in * units + (8 * tokens * units if gelu else 0),
                         tokens * units)

    def attention(self, name):
        """Scaled dot-product attention of every head: QK^T, softmax, then the weights times
        V (TF computes both products in full, under a causal mask too)."""
        n, d, h = self.n, self.d, self.heads
        return self._add(name, "attention", 0, 4 * n * n * d + 5 * h * n * n,
                         2 * h * n * n + n * d)

    def residual(self, name):
        return self._add(name, "add", 0, self.n * self.d, self.n * self.d)

    def block(self, prefix, pre_norm: bool):
        """One encoder or decoder block: attention and a 4d-wide feed-forward, each with a
        residual add and a layer norm (before them: GPT; after: BERT)."""
        d = self.d
        if pre_norm:
            self.layer_norm(f"{prefix}_ln_1")
        self.dense(f"{prefix}_qkv", 3 * d).attention(f"{prefix}_attention")
        self.dense(f"{prefix}_attention_output", d).residual(f"{prefix}_add_1")
        self.layer_norm(f"{prefix}_ln_2" if pre_norm else f"{prefix}_attention_ln")
        self.dense(f"{prefix}_ffn_in", 4 * d, gelu=True)
        self.dense(f"{prefix}_ffn_out", d, fan_in=4 * d).residual(f"{prefix}_add_2")
        if not pre_norm:
            self.layer_norm(f"{prefix}_output_ln")
        return self
