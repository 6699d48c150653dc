"""sigmatorch.Straggler (python/sigmatorch/straggler.py) over the built
libsigma-runtime: a rank at half speed found and cleared, its settings'
refusals, bad times, and the report of its node through a sigmactl that
writes down how it was called.
"""
import random
import time

import pytest

import tree

tree.use_tree()
import sigmatorch  # noqa: E402


def times(rng, slow=None, factor=2.0):
    return [0.1 * (1 + 0.02 * rng.uniform(-1, 1)) * (factor if r == slow
                                                     else 1.0)
            for r in range(4)]


def test_a_rank_at_half_speed_is_found_then_cleared(capsys):
    s = sigmatorch.Straggler(world_size=4, rank=0, escalate="off")
    rng = random.Random(5)
    found = [k for k in range(1, 31) if s.record(k, times(rng, slow=3))]
    assert found[0] == 12 and s.slow(3) and not s.slow(0)
    assert 1.9 < s.ratio(3) < 2.1
    assert "rank 3 slow (" in capsys.readouterr().out
    cleared = [k for k in range(31, 80) if s.record(k, times(rng))]
    assert cleared and not s.slow(3)
    assert "rank 3 no longer slow" in capsys.readouterr().out


def test_bad_settings_and_times_are_refused():
    with pytest.raises(ValueError, match="window"):
        sigmatorch.Straggler(world_size=4, rank=0, window=100)
    with pytest.raises(ValueError, match="rank 4"):
        sigmatorch.Straggler(world_size=4, rank=4)
    s = sigmatorch.Straggler(world_size=4, rank=0)
    with pytest.raises(ValueError, match="finite"):
        s.record(1, [0.1, float("nan"), 0.1, 0.1])
    with pytest.raises(ValueError, match="3 times for 4 ranks"):
        s.record(1, [0.1, 0.1, 0.1])


def test_the_slow_rank_reports_its_node(tmp_path, monkeypatch):
    out = tmp_path / "called"
    ctl = tmp_path / "sigmactl"
    ctl.write_text(f'#!/bin/sh\necho "$*" > {out}.tmp && mv {out}.tmp {out}\n')
    ctl.chmod(0o755)
    monkeypatch.setenv("SIGMACTL", str(ctl))
    monkeypatch.setenv("SLURMD_NODENAME", "n4")
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    monkeypatch.delenv("SIGMA_CONF", raising=False)
    fast = sigmatorch.Straggler(world_size=4, rank=1, escalate=0)
    slow = sigmatorch.Straggler(world_size=4, rank=3, escalate=0)
    rng = random.Random(9)
    for k in range(1, 13):
        t = times(rng, slow=3)
        fast.record(k, t)
        assert not out.exists()
        slow.record(k, t)
    for _ in range(500):
        if out.exists():
            break
        time.sleep(0.01)
    assert out.read_text() == "slow n4 --job 77\n"
