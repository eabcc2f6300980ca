"""The models of the exercises, in numpy (float32): forward, backward, loss and cost.

Each one is what a small ``tf.keras`` model or a hand-written TF training loop computes, written
out so that every replica of a simulated run computes real gradients on its real slice of the
batch. realdist builds the same models in TensorFlow from the same initial weights, so both
halves must do the same math:

- ``per_example_loss(w, x, y)``: the loss of every example (what TF calls the per-example loss,
  before ``tf.nn.compute_average_loss``);
- ``gradients(w, x, y, scale)``: the gradient of ``scale * sum(per_example_loss)``; with
  ``scale = 1 / global_batch`` that is each replica's share of the global-batch mean, and the
  SUM all-reduce of the replicas' shares is exactly the single-device gradient;
- ``flops(batch)`` and ``nbytes``: what the cost model needs (forward plus backward FLOPs,
  parameter bytes moved per step).

Initial weights come from a seed (Glorot-uniform kernels as Keras uses by default, zero biases),
so the two halves start from the same point.
"""

from __future__ import annotations

import numpy as np

from simdist.base.errors import InvalidArgumentError

DTYPE = np.float32


def glorot_uniform(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    """Keras' default kernel initializer: U(-l, l), l = sqrt(6 / (fan_in + fan_out))."""
    fan_in, fan_out = shape[0], shape[-1]
    limit = np.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-limit, limit, size=shape).astype(DTYPE)


def _softmax_xent(logits, labels):
    """Per-example sparse softmax cross-entropy and d(loss)/d(logits) (stable; in the logits'
    dtype, float32 in training)."""
    shifted = logits - logits.max(axis=1, keepdims=True)
    exp = np.exp(shifted)
    total = exp.sum(axis=1, keepdims=True)
    loss = np.log(total[:, 0]) - shifted[np.arange(len(labels)), labels]
    dlogits = exp / total
    dlogits[np.arange(len(labels)), labels] -= 1
    return loss.astype(logits.dtype), dlogits.astype(logits.dtype)


class Model:
    """A model: named float32 weights, per-example loss, gradients, FLOP count."""

    name = "model"
    #: "regression" (float targets) or "classification" (int labels)
    task = "regression"
    #: the TF ops the executor runs in one replica's forward pass, loss and backward pass:
    #: counted in TF 2.21's graph of realdist's replica step (``tf.function`` of the loss and
    #: ``GradientTape.gradient``), without its Const, Placeholder and NoOp ops; what a
    #: calibrated profile's per-op overhead multiplies (``HostCosts.op_overhead_ns``)
    num_ops = 10

    def __init__(self, n_features: int, n_outputs: int):
        for what, v in (("n_features", n_features), ("n_outputs", n_outputs)):
            if not isinstance(v, (int, np.integer)) or v < 1:
                raise InvalidArgumentError(f"{self.name}: {what} must be an int >= 1, "
                                           f"got {v!r}")
        self.n_features, self.n_outputs = int(n_features), int(n_outputs)

    def shapes(self) -> dict[str, tuple]:
        raise NotImplementedError

    def init(self, seed: int) -> dict[str, np.ndarray]:
        """Initial weights from ``seed``: kernels Glorot-uniform, biases zero."""
        rng = np.random.default_rng([seed, 7])
        return {k: (glorot_uniform(rng, s) if len(s) > 1 else np.zeros(s, DTYPE))
                for k, s in self.shapes().items()}

    @property
    def num_params(self) -> int:
        return int(sum(np.prod(s) for s in self.shapes().values()))

    @property
    def nbytes(self) -> int:
        """Bytes of the weights (and of a full gradient) in float32."""
        return self.num_params * np.dtype(DTYPE).itemsize

    def check_batch(self, x, y) -> None:
        """A clear error when a batch does not fit the model (before any training)."""
        want = (self.n_features,)
        if x.ndim != 2 or x.shape[1:] != want:
            raise InvalidArgumentError(
                f"{self.name} expects inputs of shape (batch, {self.n_features}), got "
                f"{tuple(x.shape)}: the dataset and the model do not match")
        if len(y) != len(x):
            raise InvalidArgumentError(f"{self.name}: {len(x)} inputs but {len(y)} targets")

    def loss(self, w, x, y) -> float:
        """The mean loss over a batch (what a single device reports)."""
        return float(self.per_example_loss(w, x, y).mean(dtype=np.float64)) if len(x) else 0.0

    def flops(self, batch: int) -> float:
        """Forward + backward FLOPs for a batch (backward = 2x forward, the usual rule)."""
        return 3.0 * self.forward_flops(batch)


class LinearRegression(Model):
    """``Dense(n_outputs)`` with mean squared error over the outputs (Keras' MSE)."""

    name = "linear"
    task = "regression"
    num_ops = 36

    def shapes(self):
        return {"kernel": (self.n_features, self.n_outputs), "bias": (self.n_outputs,)}

    def _pred(self, w, x):
        return x @ w["kernel"] + w["bias"]

    def per_example_loss(self, w, x, y):
        err = self._pred(w, x) - y.reshape(len(x), self.n_outputs)
        return (err * err).mean(axis=1)

    def gradients(self, w, x, y, scale: float):
        err = self._pred(w, x) - y.reshape(len(x), self.n_outputs)
        d = (DTYPE(2 * scale / self.n_outputs) * err).astype(DTYPE)
        return {"kernel": x.T @ d, "bias": d.sum(axis=0)}

    def forward_flops(self, batch):
        return 2.0 * batch * self.n_features * self.n_outputs


class SoftmaxRegression(Model):
    """``Dense(n_classes)`` logits with sparse softmax cross-entropy."""

    name = "softmax"
    task = "classification"
    num_ops = 27

    def shapes(self):
        return {"kernel": (self.n_features, self.n_outputs), "bias": (self.n_outputs,)}

    def per_example_loss(self, w, x, y):
        return _softmax_xent(x @ w["kernel"] + w["bias"], y)[0]

    def gradients(self, w, x, y, scale: float):
        _, d = _softmax_xent(x @ w["kernel"] + w["bias"], y)
        d *= DTYPE(scale)
        return {"kernel": x.T @ d, "bias": d.sum(axis=0)}

    def forward_flops(self, batch):
        return 2.0 * batch * self.n_features * self.n_outputs + 5.0 * batch * self.n_outputs


class MLP(Model):
    """``Dense(hidden, relu)`` then ``Dense(n_classes)`` with sparse softmax cross-entropy."""

    name = "mlp"
    task = "classification"
    num_ops = 39

    def __init__(self, n_features: int, n_outputs: int, hidden: int = 32):
        super().__init__(n_features, n_outputs)
        if not isinstance(hidden, (int, np.integer)) or hidden < 1:
            raise InvalidArgumentError(f"mlp: hidden must be an int >= 1, got {hidden!r}")
        self.hidden = int(hidden)

    def shapes(self):
        return {"hidden/kernel": (self.n_features, self.hidden), "hidden/bias": (self.hidden,),
                "output/kernel": (self.hidden, self.n_outputs), "output/bias": (self.n_outputs,)}

    def _forward(self, w, x):
        pre = x @ w["hidden/kernel"] + w["hidden/bias"]
        h = np.maximum(pre, 0)
        return pre, h, h @ w["output/kernel"] + w["output/bias"]

    def per_example_loss(self, w, x, y):
        return _softmax_xent(self._forward(w, x)[2], y)[0]

    def gradients(self, w, x, y, scale: float):
        pre, h, logits = self._forward(w, x)
        _, d = _softmax_xent(logits, y)
        d *= DTYPE(scale)
        dh = (d @ w["output/kernel"].T) * (pre > 0)
        return {"hidden/kernel": x.T @ dh, "hidden/bias": dh.sum(axis=0),
                "output/kernel": h.T @ d, "output/bias": d.sum(axis=0)}

    def forward_flops(self, batch):
        return (2.0 * batch * self.n_features * self.hidden + batch * self.hidden
                + 2.0 * batch * self.hidden * self.n_outputs + 5.0 * batch * self.n_outputs)


class EmbeddingClassifier(Model):
    """The model of TF's parameter-server tutorial: ``Embedding`` of the token ids, their mean,
    then ``Dense(1, sigmoid)`` with binary cross-entropy (``n_features`` = tokens per example,
    ``n_outputs`` = vocabulary size)."""

    name = "embedding"
    task = "binary"
    num_ops = 64

    def __init__(self, n_features: int, n_outputs: int, embedding_dim: int = 16):
        super().__init__(n_features, n_outputs)
        if not isinstance(embedding_dim, (int, np.integer)) or embedding_dim < 1:
            raise InvalidArgumentError(f"embedding: embedding_dim must be an int >= 1, "
                                       f"got {embedding_dim!r}")
        self.vocab, self.dim = self.n_outputs, int(embedding_dim)

    def shapes(self):
        return {"embedding": (self.vocab, self.dim), "dense/kernel": (self.dim, 1),
                "dense/bias": (1,)}

    def init(self, seed):
        w = super().init(seed)
        # Keras' Embedding starts from U(-0.05, 0.05)
        rng = np.random.default_rng([seed, 8])
        w["embedding"] = rng.uniform(-0.05, 0.05, self.shapes()["embedding"]).astype(DTYPE)
        return w

    def check_batch(self, x, y):
        super().check_batch(x, y)
        if x.size and (x.min() < 0 or x.max() >= self.vocab):
            raise InvalidArgumentError(f"embedding: token ids must be in [0, {self.vocab}), "
                                       f"got values from {x.min()} to {x.max()}")

    def _logits(self, w, x):
        mean = w["embedding"][x].mean(axis=1)
        return mean, (mean @ w["dense/kernel"] + w["dense/bias"])[:, 0]

    def per_example_loss(self, w, x, y):
        _, z = self._logits(w, x)
        # tf.nn.sigmoid_cross_entropy_with_logits: max(z, 0) - z y + log(1 + exp(-|z|))
        return np.maximum(z, 0) - z * y + np.log1p(np.exp(-np.abs(z)))

    def gradients(self, w, x, y, scale: float):
        mean, z = self._logits(w, x)
        d = ((1 / (1 + np.exp(-z)) - y) * DTYPE(scale)).astype(DTYPE)  # d loss / d z
        dmean = d[:, None] * w["dense/kernel"][:, 0]
        demb = np.zeros_like(w["embedding"])
        # the embedding's gradient is sparse (IndexedSlices in TF): only the looked-up rows,
        # with duplicate ids summed
        np.add.at(demb, x.reshape(-1), np.repeat(dmean / x.shape[1], x.shape[1], axis=0))
        return {"embedding": demb, "dense/kernel": mean.T @ d[:, None],
                "dense/bias": np.array([d.sum()], DTYPE)}

    def forward_flops(self, batch):
        return batch * self.n_features * self.dim + 2.0 * batch * self.dim + 5.0 * batch


MODELS = {m.name: m for m in (LinearRegression, SoftmaxRegression, MLP, EmbeddingClassifier)}


def make_model(name: str, n_features: int, n_outputs: int, **options) -> Model:
    """A model by name (``MODELS``) for a dataset's features and outputs."""
    if name not in MODELS:
        raise InvalidArgumentError(f"unknown model {name!r}: expected one of "
                                   f"{', '.join(MODELS)}")
    return MODELS[name](n_features, n_outputs, **options)
