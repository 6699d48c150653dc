"""contrib/examples/torch-moe as real processes: two ranks of the MoE
(expert-parallel over gloo), trained by train_plain.py and by
train_sigma.py, to the same parameters bit for bit; train_sigma.py
stopped by SIGUSR1 (as Slurm and sigmad stop a job) leaves with 75 on
every rank at the same step and, started again, ends where the
uninterrupted run ends."""
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

import tree

torch = pytest.importorskip("torch")

EXAMPLE = os.path.join(tree.SRC, "contrib", "examples", "torch-moe")
CORPUS = "/usr/share/games/fortunes/fortunes"
STEPS = 12
RANKS = 2


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(script, tmp_path, *extra):
    """RANKS processes of script, as srun starts them (one per rank)."""
    if not os.path.exists(CORPUS):
        pytest.skip(f"{CORPUS} (fortunes-min) is not installed")
    port = str(free_port())
    procs = []
    for rank in range(RANKS):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(RANKS),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
                   SIGMA_RUNTIME_LIB=tree.LIB, PYTHONDONTWRITEBYTECODE="1",
                   PYTHONPATH=os.path.join(tree.SRC, "python"),
                   OMP_NUM_THREADS="1")
        env.pop("SLURM_JOB_ID", None)
        procs.append(subprocess.Popen(
            [sys.executable, os.path.join(EXAMPLE, script),
             "--data", CORPUS, "--steps", str(STEPS), "--ep", str(RANKS),
             "--batch", "4", "--seq", "16", "--log-every", "1",
             "--warmup", "4", *extra],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, cwd=tmp_path))
    return procs


def finish(procs, timeout=300):
    outs = []
    for p in procs:
        out, _ = p.communicate(timeout=timeout)
        outs.append(out)
    return [p.returncode for p in procs], outs


def digests(outs):
    found = [re.findall(r"rank \d+ done: step \d+ params (\w+)", o)
             for o in outs]
    assert all(len(f) == 1 for f in found), outs
    return [f[0] for f in found]


def test_sigma_job_trains_as_the_plain_one_and_resumes_bitwise(tmp_path):
    rcs, plain = finish(launch("train_plain.py", tmp_path,
                               "--ckpt-dir", str(tmp_path / "plain")))
    assert rcs == [0] * RANKS, plain
    want = digests(plain)

    rcs, whole = finish(launch("train_sigma.py", tmp_path,
                               "--ckpt-dir", str(tmp_path / "whole")))
    assert rcs == [0] * RANKS, whole
    assert digests(whole) == want

    # stopped on request after rank 0 printed step 5
    stopped = tmp_path / "stopped"
    procs = launch("train_sigma.py", tmp_path, "--ckpt-dir", str(stopped))
    seen = []
    for line in procs[0].stdout:
        seen.append(line)
        if line.startswith("step 5 "):
            for p in procs:
                p.send_signal(signal.SIGUSR1)
            break
    rcs, outs = finish(procs)
    outs[0] = "".join(seen) + outs[0]
    assert rcs == [75] * RANKS, outs
    at = {re.search(r"stopped after step (\d+) on request", o).group(1)
          for o in outs}
    assert len(at) == 1, outs  # every rank at the same step
    assert 5 <= int(at.pop()) < STEPS

    rcs, resumed = finish(launch("train_sigma.py", tmp_path,
                                 "--ckpt-dir", str(stopped)))
    assert rcs == [0] * RANKS, resumed
    assert "step 5 " not in resumed[0]  # it went on, not from the start
    assert digests(resumed) == want
