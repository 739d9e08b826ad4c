"""A learned version's confidence map: a temperature and a shift per option, fitted
out-of-fold on the labels the version learned from (``agentbranch.policy.earned.learn.head``), carried by its head, part of its
digest and so of its evidence key; and the ladder's newest version reading while no
version holds a threshold (``agentbranch.policy.earned.learn.ladder``)."""

from __future__ import annotations

import json
import math

import _learn_streams as ls
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import agentbranch as ab
from agentbranch.core.decisions import confidence_from
from agentbranch.core.heads import LinearHead, softmax, with_head
from agentbranch.policy import Earned, QuestionKey
from agentbranch.policy.earned.learn import head as lh
from agentbranch.policy.earned.learn import ladder as ld

QUESTION = ab.yes_no("Is this about sport?")
finite_or_not = st.one_of(
    st.floats(-1e6, 1e6, allow_nan=False), st.sampled_from([math.nan, math.inf, -math.inf])
)


def any_logits(test):
    """60 examples of ``test(z, data)``: any logits ``z`` for 3 options (0 to 12 rows,
    finite or not), and ``data`` to draw their labels from."""
    logits = hnp.arrays(
        np.float64, st.tuples(st.integers(0, 12), st.just(3)), elements=finite_or_not
    )
    return settings(max_examples=60, deadline=None)(given(z=logits, data=st.data())(test))


def _softmax_nll(z: np.ndarray, y: np.ndarray, t: float) -> float:
    p = softmax(z, t)
    return float(-np.mean(np.log(p[np.arange(len(y)), y])))


def _ece(top: np.ndarray, right: np.ndarray, bins: int = 10) -> float:
    idx = np.minimum((top * bins).astype(int), bins - 1)
    return sum(
        (idx == b).mean() * abs(top[idx == b].mean() - right[idx == b].mean())
        for b in range(bins)
        if (idx == b).any()
    )


def test_the_temperature_fitted_is_the_one_the_labels_were_drawn_at():
    rng = np.random.default_rng(0)
    z = rng.normal(scale=4.0, size=(4000, 3))
    for t in (0.5, 2.5):
        p = softmax(z, t)
        y = (rng.random((len(z), 1)) > p.cumsum(1)).sum(1)
        got = lh.fit_temperature(z, y)
        assert got == pytest.approx(t, rel=0.1)
        # it is the grid's best: no other temperature fits these labels better
        assert _softmax_nll(z, y, got) <= min(_softmax_nll(z, y, s) for s in (t * 0.8, t * 1.25))


def _task(rng: np.random.Generator, n: int, dim: int = 40, noise: float = 0.25):
    """States whose label is the sign of one direction, flipped for ``noise`` of them:
    a head on few of them is sure of what it saw, and wrong a quarter of the time."""
    x = rng.normal(size=(n, dim))
    y = (x[:, 0] > 0).astype(int)
    flip = rng.random(n) < noise
    y[flip] = 1 - y[flip]
    return x / np.linalg.norm(x, axis=1, keepdims=True), y


def test_the_out_of_fold_temperature_makes_the_head_read_true_on_new_states():
    rng = np.random.default_rng(0)
    options = ["no", "yes"]
    x, y = _task(rng, 256)
    raw = lh.fit_head(options, x, [options[k] for k in y], calibrate=False)
    head = lh.fit_head(options, x, [options[k] for k in y])
    assert (head.weights == raw.weights).all()  # the map: only the temperature and biases
    assert raw.temperature == 1.0 and head.temperature > 2  # the raw head is overconfident
    # a temperature fitted on the head's own reads of its training labels would not see it
    assert lh.fit_temperature(raw.logits(x), y) < head.temperature
    xt, yt = _task(rng, 4000)
    for h, worse in ((raw, True), (head, False)):
        p = np.exp(h.log_probs(xt, options))
        e = _ece(p.max(1), p.argmax(1) == yt)
        assert (e > 0.1) if worse else (e < 0.05)
    assert _softmax_nll(head.logits(xt), yt, head.temperature) < _softmax_nll(
        raw.logits(xt), yt, 1.0
    )


def _draw(rng: np.random.Generator, p: np.ndarray) -> np.ndarray:
    return (rng.random((len(p), 1)) > p.cumsum(1)).sum(1)


def _map(z: np.ndarray, t: float, shift: np.ndarray) -> np.ndarray:
    s = z / t + shift
    e = np.exp(s - s.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def test_the_map_fitted_is_the_one_the_labels_were_drawn_at():
    rng = np.random.default_rng(5)
    z = rng.normal(scale=3.0, size=(6000, 3))
    t, shift = 1.7, np.array([0.8, -0.1, -0.7])
    y = _draw(rng, _map(z, t, shift))
    got_t, got_shift = lh.fit_map(z, y)
    assert got_t == pytest.approx(t, rel=0.1)
    assert got_shift == pytest.approx(shift, abs=0.12)
    assert got_shift.sum() == pytest.approx(0.0, abs=1e-9)  # softmax is shift-free: centred


def _nll(p: np.ndarray, y: np.ndarray) -> float:
    with np.errstate(divide="ignore"):  # a label read at probability 0: infinite loss
        return float(-np.mean(np.log(p[np.arange(len(y)), y])))


def test_a_shift_fits_what_one_temperature_cannot():
    """Reads that favour one option more than the labels do: with the temperature
    alone the reads still give that option a third of the mass where it is right less
    than a fifth of the time; the map with its shift reads each option's share true,
    with a lower log-loss and more often right."""
    rng = np.random.default_rng(6)
    shift = np.array([-1.2, 0.4, 0.8])  # the reads overstate the first option
    z = rng.normal(scale=2.5, size=(1200, 3))
    y = _draw(rng, _map(z, 1.0, shift))
    t_only = lh.fit_temperature(z, y)
    t, s = lh.fit_map(z, y)
    new = rng.normal(scale=2.5, size=(6000, 3))
    truth = _draw(rng, _map(new, 1.0, shift))
    by_t, by_map = softmax(new, t_only), _map(new, t, s)
    assert _nll(by_map, truth) < _nll(by_t, truth) - 0.05
    share = np.bincount(truth, minlength=3) / len(truth)
    assert np.abs(by_map.mean(0) - share).max() < 0.02
    assert np.abs(by_t.mean(0) - share).max() > 0.1
    assert (by_map.argmax(1) == truth).mean() > (by_t.argmax(1) == truth).mean() + 0.03
    assert _ece(by_map.max(1), by_map.argmax(1) == truth) < 0.03


@any_logits
def test_any_logits_give_a_finite_map_never_worse_than_the_temperature(z, data):
    y = data.draw(hnp.arrays(np.int64, len(z), elements=st.integers(0, 2)))
    t, shift = lh.fit_map(z, y)
    assert math.isfinite(t) and lh.T_MIN * 0.999 <= t <= lh.T_MAX * 1.001
    assert shift.shape == (3,) and np.isfinite(shift).all()
    ok = np.isfinite(z).all(1)
    if not ok.any():
        assert t == 1.0 and (shift == 0).all()
        return
    zt, yt = z[ok] - z[ok].max(1, keepdims=True), y[ok]
    ridge = lh.SHIFT_RIDGE * float(shift @ shift)
    t0 = lh.fit_temperature(z, y)
    assert _nll(_map(zt, t, shift), yt) + ridge <= _nll(softmax(zt, t0), yt) + 1e-9


def test_the_map_is_part_of_the_version_and_its_key():
    rng = np.random.default_rng(2)
    x, y = _task(rng, 64)
    head = lh.fit_head(["no", "yes"], x, ["yes" if k else "no" for k in y])
    again = lh.fit_head(["no", "yes"], x, ["yes" if k else "no" for k in y])
    assert again.digest == head.digest  # deterministic: replicas fit the same version
    bare = LinearHead(head.options, head.classes, head.weights, head.bias)
    other = LinearHead(head.options, head.classes, head.weights, head.bias, 2 * head.temperature)
    # temperature 1 keeps the digest a head without a map always had
    assert bare.digest == LinearHead(head.options, head.classes, head.weights, head.bias, 1).digest
    assert len({bare.digest, head.digest, other.digest}) == 3
    keys = {
        Earned().key(QuestionKey("sport", with_head(QUESTION, h), "embedded", "m"))
        for h in (bare, head, other)
    }
    assert len(keys) == 3
    back = LinearHead.from_dict(json.loads(json.dumps(head.to_dict())))
    assert back.temperature == head.temperature and back.digest == head.digest


@pytest.mark.parametrize("t", [0, -1.0, math.nan, math.inf, 5e-324, True, "2", None])
def test_a_temperature_that_is_not_a_finite_positive_number_is_refused(t):
    with pytest.raises(ValueError, match="temperature"):
        LinearHead(["a", "b"], ["a", "b"], [[1.0], [0.0]], [0.0, 0.0], t)


def test_too_few_labels_for_folds_keep_temperature_one():
    rng = np.random.default_rng(3)
    x, y = _task(rng, 2 * lh.FOLDS - 1)
    y[:2] = [0, 1]
    head = lh.fit_head(["no", "yes"], x, ["yes" if k else "no" for k in y])
    assert head.temperature == 1.0


@any_logits
def test_any_logits_give_a_finite_positive_temperature(z, data):
    y = data.draw(hnp.arrays(np.int64, len(z), elements=st.integers(0, 2)))
    t = lh.fit_temperature(z, y)
    assert math.isfinite(t) and lh.T_MIN * 0.999 <= t <= lh.T_MAX * 1.001
    if not np.isfinite(z).all(1).any():
        assert t == 1.0


@settings(max_examples=60, deadline=None)
@given(
    states=hnp.arrays(np.float64, st.tuples(st.integers(1, 5), st.just(4)), elements=finite_or_not),
    t=st.floats(0.05, 50.0),
)
def test_a_state_that_is_not_finite_is_never_read_with_confidence(states, t):
    head = LinearHead(
        ["a", "b", "c"], ["a", "b"], [[1.0, -2.0, 0.5, 3.0], [0.0, 1.0, -1.0, 2.0]], [0.1, 0.0], t
    )
    p = np.exp(head.log_probs(states, ["a", "b", "c"]))
    assert np.isfinite(p).all() and p.sum(1) == pytest.approx(1.0)
    for row, prob in zip(states, p):
        if not np.isfinite(row).all():
            assert prob == pytest.approx([1 / 3] * 3)
            assert confidence_from(prob.tolist()) == pytest.approx(0.0, abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(
    z=hnp.arrays(
        np.float64, st.tuples(st.integers(2, 20), st.just(2)), elements=st.floats(-30, 30)
    ),
    t=st.floats(0.05, 50.0),
)
def test_the_map_is_monotone(z, t):
    """On a yes/no head the map keeps the order of the reads' confidence (so the same
    decisions rank above any threshold); on any head a temperature above 1 never makes a
    read surer, one below 1 never less sure."""
    raw, mapped = softmax(z, 1.0).max(1), softmax(z, t).max(1)
    order = np.argsort(np.abs(z[:, 0] - z[:, 1]), kind="stable")  # raw sureness, unrounded
    assert (np.diff(raw[order]) >= 0).all() and (np.diff(mapped[order]) >= 0).all()
    if t >= 1:
        assert (mapped <= raw + 1e-12).all()
    else:
        assert (mapped >= raw - 1e-12).all()


def test_while_no_version_holds_a_threshold_the_newest_reads_and_takes_nothing():
    lad = ld.Ladder()
    for j in range(3):
        lad.rungs.append(ld.Rung(j, ld.refit_at(j) if j else 0))
    assert lad.deciding.index == 2 and [r.index for r in lad.fed] == [0, 1, 2]
    assert lad.adopt([False, False, False]) is None and lad.deciding.index == 2
    # the written question earns a threshold: it decides, the newer ones stay fed
    assert lad.adopt([True, False, False]) is None and lad.deciding.index == 0
    assert lad.adopt([True, True, False]).index == 1 and lad.deciding.index == 1
    assert [r.index for r in lad.fed] == [1, 2]
    lad.adopt([False, False])  # withdrawn: nothing open, the newest reads
    assert lad.deciding.index == 2 and lad.in_force == 1

    # on a stream: a version that reads while nothing is open takes nothing
    rng = np.random.default_rng(4)
    n = 400
    conf = rng.random(n)
    base = ls.Read(conf, rng.random(n) < 0.5, conf)  # never opens (right half the time)

    def fit(j: int, train: np.ndarray) -> ls.Read:
        return ls.Read(np.full(n, 0.99), np.ones(n, bool), np.full(n, 0.99))

    run = ls.run_ladder(Earned(precision=0.9, level=0.95), base, rng.random(n), 0.2, fit)
    reading = np.flatnonzero(run.version > 0)
    assert reading[0] == np.flatnonzero(run.labels_before >= ld.FIRST_REFIT)[0]  # reads at once
    assert not run.taken[np.isnan(run.take_at)].any()  # takes only at a threshold
    assert run.taken.any() and run.labels_before[np.flatnonzero(run.taken)[0]] > 32 + 10
