#!/usr/bin/python3
"""The MoE of moe.py trained as a PyTorch job usually is (train_plain.py:
torch.distributed, AdamW with warm-up, gradient clipping, a torch.save
checkpoint every --ckpt-every steps), and the same job protected by sigma
(train_sigma.py: sigmatorch.Run, a node-local snapshot every step in
--ckpt-dir, resume after a relaunch or requeue, the guardrails, the
straggler report, the job protocol). `diff -u train_plain.py
train_sigma.py` is what protecting a job costs (docs/pytorch.md).

  srun python3 train_plain.py --data corpus.txt --steps 200 --ep 2
  sigma-launch -- python3 train_sigma.py --data corpus.txt \
      --ckpt-dir /dev/shm/moe --replica   # node-local, each step at a buddy

--inject-nan, --inject-spike, --slow-rank and --slow-node (the rank on
that node computes --slow-factor times as long) put the faults of the
testbed's drills into the job.
"""
import argparse
import os
import time

import torch

import moe
import sigmatorch


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, help="a text file")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--ep", type=int, default=1, help="expert-parallel ranks")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--ckpt-dir", default="ckpt")
    p.add_argument("--replica", action="store_true")  # each step at a buddy
    p.add_argument("--inject-nan", type=int, default=0, metavar="STEP")
    p.add_argument("--inject-spike", type=int, default=0, metavar="STEP")
    p.add_argument("--slow-rank", type=int, default=-1, metavar="RANK")
    p.add_argument("--slow-node", default="", metavar="NODE")
    p.add_argument("--slow-factor", type=float, default=2.0)
    return p.parse_args()


def forward_backward(model, layout, data, step, a):
    """One step's loss and gradient norm, the same on every rank, with the
    gradients synchronised and clipped to 1, and the seconds this rank
    computed (before it waited for the others)."""
    t0 = time.monotonic()
    x, y = data.batch(step)
    loss = model(x, y)
    if step == a.inject_nan:
        loss = loss * float("nan")
    if a.inject_spike <= step < a.inject_spike + 3:
        loss = loss * 1e4
    model.zero_grad(set_to_none=False)
    loss.backward()
    if layout.rank == a.slow_rank or (  # a slow accelerator
            a.slow_node and os.environ.get("SLURMD_NODENAME") == a.slow_node):
        time.sleep((a.slow_factor - 1) * (time.monotonic() - t0))
    compute = time.monotonic() - t0
    moe.sync_gradients(model, layout)
    gnorm = moe.grad_norm(model, layout)
    for p in model.parameters():
        p.grad.mul_(min(1.0, 1.0 / (gnorm + 1e-6)))
    return moe.mean_over_ranks(loss.item()), gnorm, compute


def main():
    a = parse_args()
    rank, world = moe.init_distributed()
    torch.use_deterministic_algorithms(True)
    layout = moe.Layout(a.ep)
    model = moe.MoE(layout, seed=a.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / a.warmup))
    data = moe.Corpus(a.data, a.seq, a.batch, rank, a.seed)
    torch.manual_seed(a.seed + 1 + rank)  # dropout: each rank its own
    run_id = os.environ.get("SLURM_JOB_ID", "local")
    with sigmatorch.Run(a.ckpt_dir, run_id, model, opt, sched,
                        replica=a.replica) as run:
        for step in run.steps(a.steps):
            loss, gnorm, compute = forward_backward(model, layout, data,
                                                    step, a)
            if run.check(step, loss, gnorm):
                opt.step()
            sched.step()
            run.step_done(step, compute)
            if rank == 0 and step % a.log_every == 0:
                print(f"step {step} loss {loss:.4f} gnorm {gnorm:.3f} "
                      f"compute {compute:.3f} s", flush=True)
    print(f"rank {rank} done: step {a.steps} params "
          f"{moe.digest(model)}", flush=True)


if __name__ == "__main__":
    main()
