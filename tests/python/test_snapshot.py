"""sigmatorch.Snapshot (python/sigmatorch/snapshot.py) with Debian's
python3-torch, on the CPU with deterministic algorithms: a loop that is
stopped and resumed from the node-local tier ends bit for bit where the
run that never stopped ends (model, AdamW's moments and step, the
scheduler, the RNG that drives dropout and the data), in float32 and in
bfloat16; a checkpoint of another run is refused. Skipped without torch.
"""
import shutil

import pytest

import tree

tree.use_tree()
import sigmatorch  # noqa: E402

torch = pytest.importorskip("torch")


class Tiny(torch.nn.Module):
    """Two experts behind a router, dropout between: every part of the
    state a resume must restore moves in each step."""

    def __init__(self, dtype):
        super().__init__()
        self.emb = torch.nn.Embedding(32, 8, dtype=dtype)
        self.router = torch.nn.Linear(8, 2, dtype=dtype)
        self.experts = torch.nn.ModuleList(
            torch.nn.Linear(8, 8, dtype=dtype) for _ in range(2))
        self.drop = torch.nn.Dropout(0.1)
        self.out = torch.nn.Linear(8, 32, dtype=dtype)
        self.register_buffer("seen", torch.zeros((), dtype=torch.int64))

    def forward(self, x):
        h = self.emb(x)
        gate = torch.softmax(self.router(h).float(), -1).to(h.dtype)
        h = h + sum(gate[..., i:i + 1] * e(h)
                    for i, e in enumerate(self.experts))
        self.seen += x.numel()
        return self.out(self.drop(h))


def build(dtype, seed):
    torch.manual_seed(seed)
    model = Tiny(dtype)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 5))
    return model, opt, sched


def train(model, opt, sched, first, last, snap=None, wait=False):
    for step in range(first, last + 1):
        x = torch.randint(0, 32, (4, 6))  # the data comes from the RNG
        loss = torch.nn.functional.cross_entropy(
            model(x).float().flatten(0, 1), x.roll(1, 1).flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if snap:
            snap.save(step, {"step": step})
            if wait:  # each copy to the shared tier made before the next
                snap.wait()


def state_bytes(model, opt):
    out = {k: v.detach().view(torch.uint8).numpy().tobytes()
           if v.dtype == torch.bfloat16 else v.detach().numpy().tobytes()
           for k, v in model.state_dict().items()}
    for pid, st in opt.state_dict()["state"].items():
        for k, v in st.items():
            t = v.float() if v.dtype == torch.bfloat16 else v
            out[f"optim.{pid}.{k}"] = t.numpy().tobytes()
    out["lr"] = repr([g["lr"] for g in opt.param_groups])
    out["rng"] = torch.get_rng_state().numpy().tobytes()
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_resume_is_bitwise(tmp_path, dtype):
    torch.use_deterministic_algorithms(True)
    model, opt, sched = build(dtype, 0)
    train(model, opt, sched, 1, 14)
    whole = state_bytes(model, opt)

    model, opt, sched = build(dtype, 0)
    snap = sigmatorch.Snapshot(tmp_path, "job-7", model, opt, sched, rank=0)
    train(model, opt, sched, 1, 9, snap)
    snap.close()  # the process ends after step 9's save

    model, opt, sched = build(dtype, 1)  # another start, another RNG
    snap = sigmatorch.Snapshot(tmp_path, "job-7", model, opt, sched, rank=0)
    start, position = snap.restore()
    assert (start, position) == (9, {"step": 9})
    train(model, opt, sched, start + 1, 14)
    resumed = state_bytes(model, opt)
    assert resumed.keys() == whole.keys()
    for k in whole:
        assert resumed[k] == whole[k], k


class Wide(torch.nn.Module):
    """Enough bytes (48 MiB) that the copy behind save() takes a while,
    and a buffer the forward pass changes in place."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Linear(2048, 2048)
        self.register_buffer("stat", torch.zeros(4 << 20))

    def forward(self, x):
        self.stat += 1
        return self.w(x)


def test_copy_behind_keeps_the_state_of_the_save(tmp_path):
    """save() returns before the copy (copy="behind"): the next forward
    pass changes a buffer at once, and the optimizer's step the
    parameters, yet the step holds the values of the save."""
    torch.manual_seed(0)
    model = Wide()
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    x = torch.randn(2, 2048)
    model(x).sum().backward()
    want = {k: v.clone() for k, v in model.state_dict().items()}
    snap = sigmatorch.Snapshot(tmp_path, "job-7", model, opt, rank=0)
    snap.save(1)
    model(x)
    opt.step()
    snap.close()
    assert not torch.equal(model.w.weight, want["w.weight"])

    back = Wide()
    snap = sigmatorch.Snapshot(tmp_path, "job-7", back,
                               torch.optim.SGD(back.parameters(), lr=1.0),
                               rank=0)
    assert snap.restore() == (1, None)
    snap.close()
    for k, v in back.state_dict().items():
        assert torch.equal(v, want[k]), k


def shared_snapshot(tmp_path, seed=0):
    model, opt, sched = build(torch.float32, seed)
    snap = sigmatorch.Snapshot(tmp_path / "local", "job-7", model, opt,
                               sched, rank=0, shared=tmp_path / "shared",
                               shared_every=4, shared_keep=2)
    return model, opt, sched, snap


def test_shared_tier_resumes_where_the_node_local_tier_is_gone(tmp_path):
    """Every 4th step goes to the shared tier too. Tier 1, newer, wins
    while it is there; on other nodes (tier 1 gone) the job resumes from
    the shared tier's step 8 and ends bit for bit as the run that never
    stopped."""
    torch.use_deterministic_algorithms(True)
    model, opt, sched = build(torch.float32, 0)
    train(model, opt, sched, 1, 14)
    whole = state_bytes(model, opt)

    model, opt, sched, snap = shared_snapshot(tmp_path)
    train(model, opt, sched, 1, 10, snap, wait=True)
    snap.close()
    assert sorted(p.name for p in (tmp_path / "shared/rank-0").iterdir()) \
        == ["step-4.h5", "step-4.h5.seal", "step-8.h5", "step-8.h5.seal"]

    _, _, _, snap = shared_snapshot(tmp_path, seed=1)
    assert snap.restore() == (10, {"step": 10})
    snap.close()

    shutil.rmtree(tmp_path / "local")
    model, opt, sched, snap = shared_snapshot(tmp_path, seed=1)
    start, position = snap.restore()
    assert (start, position) == (8, {"step": 8})
    train(model, opt, sched, start + 1, 14)
    snap.close()
    resumed = state_bytes(model, opt)
    for k in whole:
        assert resumed[k] == whole[k], k


def damage(path):
    with open(path, "r+b") as f:
        f.seek(-100, 2)
        f.write(b"\xff" * 8)


def test_shared_tier_passes_over_a_damaged_step(tmp_path, capsys):
    """Tier 1's step 8 damaged: the shared tier's step 8 is next in the
    plan. Then tier 1 gone and the shared step 8 damaged: step 4."""
    model, opt, sched, snap = shared_snapshot(tmp_path)
    train(model, opt, sched, 1, 8, snap, wait=True)
    snap.close()
    damage(tmp_path / "local/rank-0/step-8.h5")
    _, _, _, snap = shared_snapshot(tmp_path, seed=1)
    assert snap.restore() == (8, {"step": 8})
    assert snap.restored_from == "shared"
    snap.close()
    assert "step 8 of the node-local tier not restored" in \
        capsys.readouterr().err

    shutil.rmtree(tmp_path / "local")
    damage(tmp_path / "shared/rank-0/step-8.h5")
    _, _, _, snap = shared_snapshot(tmp_path, seed=1)
    assert snap.restore() == (4, {"step": 4})
    snap.close()
    assert "step 8 of the shared tier not restored" in \
        capsys.readouterr().err


def test_shared_tier_failure_does_not_stop_the_loop(tmp_path, capsys):
    """A shared tier that cannot be written is said, and the loop goes
    on; wait() raises it until a later copy succeeds."""
    model, opt, sched, snap = shared_snapshot(tmp_path)
    dest = tmp_path / "shared/rank-0"
    shutil.rmtree(dest)
    dest.write_text("not a directory")
    train(model, opt, sched, 1, 5, snap)
    with pytest.raises(OSError, match="copy to the shared tier"):
        snap.wait()
    assert "the copy of step 4 to the shared tier" in capsys.readouterr().err
    dest.unlink()
    train(model, opt, sched, 6, 8, snap)
    snap.close()  # step 8's copy succeeded: nothing raised
    assert (dest / "step-8.h5.seal").exists()


def test_nothing_to_resume(tmp_path):
    model, opt, sched = build(torch.float32, 0)
    snap = sigmatorch.Snapshot(tmp_path, "job-7", model, opt, sched, rank=0)
    assert snap.restore() == (0, None)


def test_another_run_is_refused(tmp_path):
    model, opt, sched = build(torch.float32, 0)
    snap = sigmatorch.Snapshot(tmp_path, "job-7", model, opt, sched, rank=0)
    train(model, opt, sched, 1, 2, snap)
    snap.close()
    other = sigmatorch.Snapshot(tmp_path, "job-8", model, opt, sched, rank=0)
    with pytest.raises(ValueError, match="run job-7, not of this run"):
        other.restore()


def test_unsaveable_position_is_named(tmp_path):
    model, opt, sched = build(torch.float32, 0)
    snap = sigmatorch.Snapshot(tmp_path, "job-7", model, opt, sched, rank=0)
    with pytest.raises(TypeError, match="cannot be saved as JSON"):
        snap.save(1, {"loader": object()})


# ---- sigmatorch.Run: the loop's one object -----------------------------------

def run_loop(tmp_path, last, dtype=torch.float32, bad=None, stop_at=None,
             seed=0):
    """Train through a Run; bad: {step: factor} multiplies that step's
    loss (nan: a NaN); stop_at: SIGUSR1 arrives during that step."""
    import os
    import signal
    model, opt, sched = build(dtype, seed)
    checks = {}
    with sigmatorch.Run(tmp_path, "job-9", model, opt, sched, rank=0,
                        straggler=False,
                        guard={"min_samples": 5, "window": 10}) as run:
        for step in run.steps(last):
            x = torch.randint(0, 32, (4, 6))
            loss = torch.nn.functional.cross_entropy(
                model(x).float().flatten(0, 1), x.roll(1, 1).flatten())
            loss = loss * (bad or {}).get(step, 1.0)
            opt.zero_grad()
            loss.backward()
            gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
            checks[step] = run.check(step, loss, gnorm)
            if checks[step]:
                opt.step()
            sched.step()
            if step == stop_at:
                os.kill(os.getpid(), signal.SIGUSR1)
            run.step_done(step)
    return model, opt, checks, run.start


def test_run_stops_on_request_and_resumes_bitwise(tmp_path, monkeypatch):
    """A stop on request, then a requeue onto other nodes: the node-local
    tier is gone, and the job's shared tier (from sigma's environment,
    every 4 steps) has the step of the stop, 7, all the same."""
    torch.use_deterministic_algorithms(True)
    model, opt, _, _ = run_loop(tmp_path / "whole", 12)
    whole = state_bytes(model, opt)
    monkeypatch.setenv("SIGMA_CKPT_DIR", str(tmp_path / "shared"))
    monkeypatch.setenv("SIGMA_CKPT_EVERY", "4")
    with pytest.raises(SystemExit) as stop:
        run_loop(tmp_path / "moved", 12, stop_at=7)
    assert stop.value.code == sigmatorch.EXIT_REQUEUE
    # step 4 was due too, but a copy still waiting gives way to a newer
    assert sigmatorch.Checkpoint(tmp_path / "shared/sigmatorch-job-9",
                                 "job-9", rank=0).steps()[0] == 7
    shutil.rmtree(tmp_path / "moved")
    model, opt, _, start = run_loop(tmp_path / "moved", 12, seed=1)
    assert start == 7  # 0 steps lost: the stop waited for step 7's copy
    resumed = state_bytes(model, opt)
    for k in whole:
        assert resumed[k] == whole[k], k


def test_run_skips_a_nan_and_rolls_back_after_spikes(tmp_path, capsys):
    nan = float("nan")
    model, opt, checks, _ = run_loop(tmp_path, 20, bad={8: nan})
    assert checks[8] is False and checks[9] is True
    assert all(torch.isfinite(p).all() for p in model.parameters())
    # three spikes in a row: the third rolls back to the newest snapshot
    model, opt, checks, _ = run_loop(tmp_path / "spikes", 24,
                                     bad={14: 1e4, 15: 1e4, 16: 1e4})
    out = capsys.readouterr().out
    assert "loss-spike" in out and "rollback" in out, out
    assert not any(checks[s] for s in (14, 15, 16))
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_run_lowers_the_learning_rate_after_a_spike(tmp_path):
    """A spike: its update is skipped, and the next lr_steps updates use
    the learning rate times lr_factor. The scheduler's own value is left
    as it was: StepLR computes each step's from the last, so a lowered
    value left behind would stay."""
    model = torch.nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(10.0)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1000, gamma=0.5)
    used, after = {}, {}
    with sigmatorch.Run(tmp_path, "job-lr", model, opt, sched, rank=0,
                        straggler=False,
                        guard={"min_samples": 5, "window": 10,
                               "lr_steps": 3, "lr_factor": 0.5}) as run:
        for step in run.steps(16):
            loss = model(torch.ones(1, 1)).sum()  # gradient 1
            loss = loss * (1e4 if step == 8 else 1.0)
            opt.zero_grad()
            loss.backward()
            before = model.weight.item()
            if run.check(step, loss, model.weight.grad.norm()):
                opt.step()
                used[step] = round(before - model.weight.item(), 6)
            sched.step()
            after[step] = opt.param_groups[0]["lr"]
            run.step_done(step)
    assert 8 not in used
    assert [s for s in used if used[s] == 0.05] == [9, 10, 11], used
    assert all(used[s] == 0.1 for s in used if s not in (9, 10, 11)), used
    assert set(after.values()) == {0.1}, after


def test_run_takes_straggler_settings_from_the_environment(tmp_path,
                                                           monkeypatch):
    model, opt, sched = build(torch.float32, 0)
    monkeypatch.setenv("SIGMA_STRAGGLER", "escalate=0 slow=1.5")
    with sigmatorch.Run(tmp_path, "job-env", model, opt, sched,
                        rank=0) as run:
        assert run.straggler is not None
    for bad, what in (("escalate", "'escalate' is not a setting"),
                      ("rank=3", "'rank=3' is not a setting"),
                      ("bogus=1", "bogus")):
        monkeypatch.setenv("SIGMA_STRAGGLER", bad)
        with pytest.raises(ValueError, match=what):
            sigmatorch.Run(tmp_path, "job-env", model, opt, sched, rank=0)
