"""The numpy models (gradients against finite differences, losses against their formulas)
and the datasets (deterministic, partial batches, TF's split of a global batch)."""

import numpy as np
import pytest

from simdist.distribute.input_lib import split_bounds, split_global_batch
from simdist.training.data import TUTORIAL_VOCAB, digits, global_batches, load_dataset
from simdist.base.errors import InvalidArgumentError
from simdist.training.exercises import Exercise
from simdist.training.models import make_model

PAIRS = [("linear", "regression"), ("softmax", "classification"), ("mlp", "digits"),
         ("embedding", "vocab")]


def _loss64(model, w, x, y):
    return float(np.sum(model.per_example_loss(w, x, y), dtype=np.float64))


@pytest.mark.parametrize("model_name,dataset", PAIRS)
def test_gradients_match_finite_differences(model_name, dataset):
    model, data = Exercise(model=model_name, dataset=dataset, strategy="default").build()
    w = model.init(3)
    x, y = data.x[:16], data.y[:16]
    grads = model.gradients(w, x, y, 1.0)
    rng = np.random.default_rng(0)
    for name, value in w.items():
        assert grads[name].shape == value.shape and grads[name].dtype == np.float32
        flat = value.reshape(-1)
        for i in rng.choice(flat.size, size=min(5, flat.size), replace=False):
            if model_name == "embedding" and name == "embedding":
                i = int(x[0, 0]) * model.dim + int(i) % model.dim  # a looked-up row
            w64 = {k: v.astype(np.float64) for k, v in w.items()}
            plus, minus = dict(w64), dict(w64)
            plus[name] = w64[name].copy().reshape(-1)
            minus[name] = w64[name].copy().reshape(-1)
            plus[name][i] += 1e-4
            minus[name][i] -= 1e-4
            plus[name] = plus[name].reshape(value.shape)
            minus[name] = minus[name].reshape(value.shape)
            numeric = (_loss64(model, plus, x, y) - _loss64(model, minus, x, y)) / 2e-4
            assert grads[name].reshape(-1)[i] == pytest.approx(numeric, rel=2e-3, abs=2e-4), \
                (name, i)


def test_losses_follow_their_formulas():
    model = make_model("linear", 2, 1)
    w = {"kernel": np.array([[1.0], [2.0]], np.float32), "bias": np.array([0.5], np.float32)}
    x = np.array([[1, 1], [0, 2]], np.float32)
    y = np.array([[3.0], [4.0]], np.float32)
    np.testing.assert_allclose(model.per_example_loss(w, x, y), [0.25, 0.25])
    clf = make_model("softmax", 2, 3)
    w = {"kernel": np.zeros((2, 3), np.float32), "bias": np.zeros(3, np.float32)}
    np.testing.assert_allclose(clf.per_example_loss(w, x, np.array([0, 2])), [np.log(3)] * 2,
                               rtol=1e-6)
    emb = make_model("embedding", 3, len(TUTORIAL_VOCAB))
    w = emb.init(0)
    w["dense/kernel"][:] = 0
    w["dense/bias"][:] = 2.0  # z = 2 for every example
    ids = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
    expected = [np.log1p(np.exp(-2.0)), 2 + np.log1p(np.exp(-2.0))]  # y = 1, y = 0
    np.testing.assert_allclose(emb.per_example_loss(w, ids, np.array([1.0, 0.0], np.float32)),
                               expected, rtol=1e-6)


def test_embedding_gradient_sums_duplicate_ids():
    emb = make_model("embedding", 3, len(TUTORIAL_VOCAB))
    w = emb.init(1)
    once = emb.gradients(w, np.array([[1, 2, 3]], np.int32), np.array([1.0], np.float32), 1.0)
    twice = emb.gradients(w, np.array([[1, 1, 3]], np.int32), np.array([1.0], np.float32), 1.0)
    untouched = [i for i in range(len(TUTORIAL_VOCAB)) if i not in (1, 2, 3)]
    assert not once["embedding"][untouched].any()
    # id 1 appears twice in the example: its row gets twice the gradient of id 3's row
    np.testing.assert_allclose(twice["embedding"][1], 2 * twice["embedding"][3], rtol=1e-5)
    assert twice["embedding"][1].any() and not twice["embedding"][2].any()


def test_initial_weights_depend_only_on_the_seed():
    model = make_model("mlp", 64, 10, hidden=8)
    a, b, c = model.init(5), model.init(5), model.init(6)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["hidden/kernel"], c["hidden/kernel"])
    assert not a["hidden/bias"].any() and a["hidden/kernel"].dtype == np.float32


def test_datasets_are_deterministic_and_shaped():
    a, b = load_dataset("regression", seed=1), load_dataset("regression", seed=1)
    assert np.array_equal(a.x, b.x) and a.x.dtype == np.float32
    d = digits()
    assert d.x.shape == (1797, 64) and d.x.max() <= 1.0 and set(np.unique(d.y)) == set(range(10))
    v = load_dataset("vocab")
    assert v.x.shape[1] == 3 and v.x.min() >= 1
    np.testing.assert_array_equal(v.y, (v.x == TUTORIAL_VOCAB.index("avenger")).any(axis=1))
    with pytest.raises(InvalidArgumentError, match="unknown dataset 'mnist'"):
        load_dataset("mnist")


def test_global_batches_repeat_epochs_with_a_partial_last_batch():
    data = load_dataset("regression")  # 1024 examples
    batches = list(global_batches(data, 300, 5, seed=2))
    assert [len(x) for x, _ in batches] == [300, 300, 300, 124, 300]
    first_epoch = np.concatenate([x for x, _ in batches[:4]])
    assert sorted(map(tuple, first_epoch)) == sorted(map(tuple, data.x))  # each example once
    again = list(global_batches(data, 300, 5, seed=2))
    assert all(np.array_equal(p[0], q[0]) for p, q in zip(batches, again))
    other = next(global_batches(data, 300, 1, seed=3))[0]
    assert not np.array_equal(other, batches[0][0])


def test_split_of_a_global_batch_follows_tf():
    # observed on real TF 2.21, MirroredStrategy over 4 logical CPUs, batch without
    # drop_remainder: ceil(b / n) per replica, in order
    assert split_global_batch(7, 4) == [2, 2, 2, 1]
    assert split_global_batch(6, 4) == [2, 2, 2, 0]
    assert split_global_batch(3, 4) == [1, 1, 1, 0]
    assert split_global_batch(1, 4) == [1, 0, 0, 0]
    assert split_global_batch(64, 4) == [16] * 4
    assert split_bounds(7, 4) == [(0, 2), (2, 4), (4, 6), (6, 7)]
    with pytest.raises(InvalidArgumentError, match="num_replicas must be >= 1"):
        split_global_batch(4, 0)
