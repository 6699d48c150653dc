"""sigmatorch.Guard (python/sigmatorch/guard.py) over the built
libsigma-runtime: sigma-train's decisions on a loop's loss and gradient
norm, its settings' refusals, and its state in a checkpoint.
"""
import math
import pickle

import pytest

import tree

tree.use_tree()
import sigmatorch  # noqa: E402


def calm(guard, first, last):
    """Steps first..last of a calm run; each must be accepted."""
    for s in range(first, last + 1):
        d = guard.check(s, 2.0 * (1 + 0.01 * math.sin(s)),
                        1.0 + 0.01 * math.cos(s))
        assert not d, str(d)


def test_bad_settings_are_named():
    with pytest.raises(ValueError, match="window"):
        sigmatorch.Guard(window=1)
    with pytest.raises(ValueError, match='unknown guard setting "colour"'):
        sigmatorch.Guard(colour="blue")
    with pytest.raises(ValueError, match="lr_factor"):
        sigmatorch.Guard(lr_factor=3)


def test_nan_is_recomputed_then_skipped():
    g = sigmatorch.Guard()
    calm(g, 1, 30)
    d = g.check(31, float("nan"), 1.0)
    assert d.recompute and not d.skip and d.cause == "non-finite"
    d = g.check(31, float("nan"), 1.0, recomputed=True)
    assert d.skip and d.exit_code is None
    assert str(d) == "guard: step 31: non-finite value nan: skip"


def test_spike_lowers_the_learning_rate_for_a_window():
    g = sigmatorch.Guard(recompute=False, lr_steps=5, lr_factor=0.25)
    calm(g, 1, 30)
    d = g.check(31, 300.0, 1.0)
    assert d.skip and d.lower_lr and d.cause == "loss-spike" and d.z > 6
    assert [g.lr_scale(s) for s in (32, 36, 37)] == [0.25, 0.25, 1.0]


def test_a_recomputation_that_differs_is_hardware():
    g = sigmatorch.Guard()
    calm(g, 1, 30)
    assert g.check(31, 2.0, 1e4).recompute
    d = g.check(31, 2.0, 1.0, recomputed=True)
    assert d.cause == "hardware"
    assert d.exit_code == sigmatorch.EXIT_HARDWARE


def test_rollback_then_giving_up():
    g = sigmatorch.Guard(recompute=False, rollback_after=2, max_rollbacks=1)
    calm(g, 1, 30)
    assert g.check(31, float("inf"), 1.0).skip
    d = g.check(32, float("inf"), 1.0)
    assert d.rollback and d.exit_code is None
    g.rolled_back(30, 32)
    assert [g.skip_data(s) for s in (30, 31, 32, 33)] == [False, True, True,
                                                          False]
    calm(g, 33, 35)
    g.check(36, float("nan"), 1.0)
    d = g.check(37, float("nan"), 1.0)
    assert not d.rollback and d.exit_code == sigmatorch.EXIT_DIVERGED


def test_state_survives_a_checkpoint():
    a = sigmatorch.Guard()
    calm(a, 1, 40)
    saved = pickle.loads(pickle.dumps(a.state_dict()))
    b, fresh = sigmatorch.Guard(), sigmatorch.Guard()
    b.load_state_dict(saved)
    da, db = a.check(41, 9.0, 1.0), b.check(41, 9.0, 1.0)
    assert da.recompute and db.recompute and da.z == db.z
    assert not fresh.check(41, 9.0, 1.0)


def test_a_foreign_state_is_refused():
    g = sigmatorch.Guard()
    blob = sigmatorch.Guard().state_dict()["sigma_guard"]
    with pytest.raises(ValueError, match="guard state"):
        g.load_state_dict({"sigma_guard": blob[:-3]})
    with pytest.raises(ValueError, match="not a guard's state_dict"):
        g.load_state_dict({"model": b"x"})
