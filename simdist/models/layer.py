"""A model as its layers: ``Layer`` (one Keras layer's weights, FLOPs and output) and
``Model`` (the ordered list, with its totals and its gradients in backward order).

What ``model.summary()`` in Keras lists, with the costs a simulator needs: a layer's trainable
parameters, its forward FLOPs for one example (a multiply-add is 2 FLOPs), the bytes of its
output activation for one example (float32, kept for the backward pass) and, for the model,
the bytes of one example's input. The backward pass costs about twice the forward (Kaplan et
al. 2020: 2 FLOPs per parameter and token forward, 4 backward), and the gradients become
ready last layer first: ``Model.gradients`` lists them in that order, and
``Model.gradient_buckets`` fuses them as Horovod's fusion buffer and TF's all-reduce packing
do.
"""

from __future__ import annotations

from dataclasses import dataclass

from simdist.base.errors import InvalidArgumentError

#: bytes of one element, by dtype (activations and gradients are float32 unless said)
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
#: backward FLOPs per forward FLOP (the gradients of the inputs and of the weights)
BACKWARD_PER_FORWARD = 2


@dataclass(frozen=True)
class Layer:
    """One layer of a model: its name (Keras-style), kind (conv2d, dense, batch_norm...),
    trainable parameters, forward FLOPs and output activation bytes for one example."""

    name: str
    kind: str
    params: int
    flops: int
    activation_bytes: int


@dataclass(frozen=True)
class Gradient:
    """One layer's gradient as it becomes ready in the backward pass."""

    layer: str
    nbytes: int


@dataclass(frozen=True)
class Bucket:
    """Gradients fused into one all-reduce (Horovod's fusion buffer, TF's packing)."""

    layers: tuple[str, ...]
    nbytes: int


@dataclass(frozen=True)
class Published:
    """The totals a model's source publishes, and how close the layer list must come."""

    params: float
    macs: float  # forward multiply-adds for one example, as papers count "FLOPs"
    source: str
    params_tolerance: float  # the largest relative difference allowed, e.g. 0.03 for 3%
    macs_tolerance: float
    note: str = ""  # why the layer list and the published figure differ


@dataclass(frozen=True)
class Model:
    """A network as an ordered list of layers (input first)."""

    name: str
    summary: str
    layers: tuple[Layer, ...]
    input_bytes: int  # one example's input, as the model reads it
    published: Published | None = None

    def __post_init__(self):
        if not self.layers:
            raise InvalidArgumentError(f"model {self.name!r} has no layers: expected at least "
                                       "one")

    @property
    def params(self) -> int:
        return sum(layer.params for layer in self.layers)

    @property
    def forward_flops(self) -> int:
        """Forward FLOPs of one example (2 per multiply-add)."""
        return sum(layer.flops for layer in self.layers)

    @property
    def training_flops(self) -> int:
        """Forward and backward FLOPs of one example."""
        return (1 + BACKWARD_PER_FORWARD) * self.forward_flops

    @property
    def activation_bytes(self) -> int:
        """Bytes of every layer's output for one example: what the backward pass keeps."""
        return sum(layer.activation_bytes for layer in self.layers)

    def gradients(self, dtype: str = "float32") -> list[Gradient]:
        """Each layer's gradient (layers with weights only), in the order the backward pass
        makes them ready: last layer first."""
        size = _dtype_bytes(dtype)
        return [Gradient(layer.name, layer.params * size) for layer in reversed(self.layers)
                if layer.params]

    def gradient_buckets(self, fusion_bytes: int, dtype: str = "float32") -> list[Bucket]:
        """The gradients fused in backward order: a bucket closes once it holds at least
        ``fusion_bytes`` (a gradient larger than that is a bucket of its own); 0: one bucket
        per layer. Horovod's ``HOROVOD_FUSION_THRESHOLD`` (64 MiB by default) and PyTorch
        DDP's ``bucket_cap_mb`` (25 MB) work alike."""
        if not isinstance(fusion_bytes, int) or fusion_bytes < 0:
            raise InvalidArgumentError(f"fusion_bytes {fusion_bytes!r}: expected a whole "
                                       "number of bytes >= 0")
        buckets, names, filled = [], [], 0
        for gradient in self.gradients(dtype):
            names.append(gradient.layer)
            filled += gradient.nbytes
            if filled >= fusion_bytes:
                buckets.append(Bucket(tuple(names), filled))
                names, filled = [], 0
        if names:
            buckets.append(Bucket(tuple(names), filled))
        return buckets

    def totals(self) -> dict:
        """The model's totals, for a table: params, GFLOPs forward, activation MB, input KB."""
        return {"model": self.name, "params": self.params,
                "forward GFLOPs": self.forward_flops / 1e9,
                "activation MB": self.activation_bytes / 1e6,
                "input KB": self.input_bytes / 1e3, "layers": len(self.layers)}


def _dtype_bytes(dtype: str) -> int:
    if dtype not in DTYPE_BYTES:
        raise InvalidArgumentError(f"dtype {dtype!r}: expected one of {', '.join(DTYPE_BYTES)}")
    return DTYPE_BYTES[dtype]
