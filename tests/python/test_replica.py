"""The buddy's replica (sigmatorch.replica) as real processes: two ranks
over gloo snapshot a model every step with replica=True; one rank's own
directory is then lost (its node replaced), and the job, started again,
gets that rank's newest step back from its buddy and ends bit for bit as
the run never stopped. With the buddy's replica lost too, nothing is
restorable and the job starts over rather than loading a mix."""
import os
import shutil
import socket
import subprocess
import sys
import textwrap

import pytest

import tree

torch = pytest.importorskip("torch")
RANKS = 2

SCRIPT = textwrap.dedent("""
    import os, sys, hashlib
    import torch, torch.distributed as dist
    import sigmatorch
    directory, stop, last = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                torch.nn.Linear(16, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    snap = sigmatorch.Snapshot(directory, "job", model, opt, replica=True)
    start, _ = snap.restore()
    print("start", start, flush=True)
    g = torch.Generator().manual_seed(rank)
    for step in range(1, last + 1):
        x = torch.randn(4, 8, generator=g)
        if step <= start:
            continue
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
        opt.step()
        snap.save(step)
        if step == stop:
            break
    snap.close()
    h = hashlib.sha256()
    for t in model.state_dict().values():
        h.update(t.numpy().tobytes())
    print("done", h.hexdigest()[:16], flush=True)
""")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(directory, stop, last):
    port = str(free_port())
    procs = []
    for rank in range(RANKS):
        # USE_LIBUV=0: Debian's torch 2.4 and later asks for a libuv store
        # by default but is built without libuv (docs/pytorch.md)
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(RANKS),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=port, USE_LIBUV="0",
                   SIGMA_RUNTIME_LIB=tree.LIB, OMP_NUM_THREADS="1",
                   PYTHONPATH=os.path.join(tree.SRC, "python"))
        procs.append(subprocess.Popen(
            [sys.executable, "-c", SCRIPT, str(directory), str(stop),
             str(last)], env=env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0] * RANKS, outs
    return outs


def field(outs, key):
    return [next(line.split()[1] for line in o.splitlines()
                 if line.startswith(key + " ")) for o in outs]


def test_a_lost_rank_comes_back_from_its_buddy(tmp_path):
    whole = launch(tmp_path / "whole", 10, 10)

    d = tmp_path / "stopped"
    launch(d, 6, 10)
    assert sorted(os.listdir(d / "replica-of-rank-0")) == [
        "step-5.h5", "step-5.h5.seal", "step-6.h5", "step-6.h5.seal"]
    shutil.rmtree(d / "rank-1")  # its node was replaced: both of its
    shutil.rmtree(d / "replica-of-rank-0")  # directories are gone
    resumed = launch(d, 10, 10)
    # rank 1 had nothing of its own: its step 6 came back from rank 2
    assert field(resumed, "start") == ["6"] * RANKS
    assert field(resumed, "done") == field(whole, "done")


def test_no_step_without_the_replica_too(tmp_path):
    d = tmp_path / "lost"
    launch(d, 6, 10)
    shutil.rmtree(d / "rank-1")
    shutil.rmtree(d / "replica-of-rank-1")  # held by rank 2: lost as well
    resumed = launch(d, 10, 10)
    assert field(resumed, "start") == ["0"] * RANKS
