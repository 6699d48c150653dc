"""moe.py - a small Mixtral-style mixture of experts in PyTorch, for the
example training scripts beside it (train_plain.py, train_sigma.py):
byte tokens, causal attention, a router choosing 2 experts of E per
token, the experts sharded over an expert-parallel group (tokens go to
the rank that holds their expert and back, all-to-all), data parallel
across the groups. Runs on the CPU over gloo, or on GPUs over NCCL.

The model, the data and the parallel plumbing live here, so that the two
training scripts differ only in what sigma adds.
"""
import hashlib
import math
import os
import re
import subprocess

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dfn
import torch.nn.functional as F


# ---- the process groups ------------------------------------------------------

class Layout:
    """world = dp x ep ranks: consecutive ranks form an expert group (each
    holds E/ep experts of every layer); the ranks at the same place in
    every expert group form a data-parallel group (they hold the same
    experts)."""

    def __init__(self, ep):
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        if self.world % ep:
            raise SystemExit(f"--ep {ep} does not divide {self.world} ranks")
        self.ep, self.dp = ep, self.world // ep
        self.ep_rank = self.rank % ep
        self.ep_group = self.dp_group = None
        for g in range(self.dp):  # every rank makes every group
            grp = dist.new_group(list(range(g * ep, (g + 1) * ep)))
            if self.rank // ep == g:
                self.ep_group = grp
        for i in range(ep):
            grp = dist.new_group(list(range(i, self.world, ep)))
            if self.ep_rank == i:
                self.dp_group = grp


def slurm_rendezvous():
    """Under srun: the address Slurm has for the step's first node (rank 0
    runs there), and a port drawn from the job, its requeues and
    sigma-launch's relaunches, so that each launch meets on a fresh one."""
    nodes = os.environ.get("SLURM_STEP_NODELIST",
                           os.environ.get("SLURM_JOB_NODELIST", ""))
    first = subprocess.run(["scontrol", "show", "hostnames", nodes],
                           capture_output=True, text=True,
                           check=True).stdout.split()[0]
    node = subprocess.run(["scontrol", "show", "node", first],
                          capture_output=True, text=True).stdout
    addr = re.search(r"NodeAddr=(\S+)", node)
    launch = (int(os.environ.get("SLURM_JOB_ID", 0)) * 64 +
              int(os.environ.get("SLURM_RESTART_COUNT", 0)) * 8 +
              int(os.environ.get("SIGMA_LAUNCH", 0)))
    return addr.group(1) if addr else first, str(20000 + launch % 20000)


def init_distributed(backend="gloo"):
    """torch.distributed from torchrun's variables (RANK, WORLD_SIZE,
    MASTER_ADDR, MASTER_PORT), else from Slurm's under srun."""
    rank = int(os.environ.get("RANK", os.environ.get("SLURM_PROCID", 0)))
    world = int(os.environ.get("WORLD_SIZE",
                               os.environ.get("SLURM_NTASKS", 1)))
    if "MASTER_ADDR" not in os.environ and "SLURM_PROCID" in os.environ:
        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = \
            slurm_rendezvous()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29500")
    # Debian's torch 2.4 and later asks for a libuv store by default, but
    # is built without libuv; the plain store serves a rendezvous as well
    os.environ.setdefault("USE_LIBUV", "0")
    dist.init_process_group(backend, rank=rank, world_size=world)
    return rank, world


# ---- the model ---------------------------------------------------------------

class Experts(torch.nn.Module):
    """This rank's experts of one layer (SwiGLU), and the exchange of
    tokens with the other ranks of the expert group."""

    def __init__(self, layout, E, D, Fh, gen):
        super().__init__()
        self.layout, self.E = layout, E
        self.local = E // layout.ep
        first = layout.ep_rank * self.local
        # every expert drawn on every rank, so that any layout starts alike
        w1 = torch.randn(E, D, Fh, generator=gen) / math.sqrt(D)
        w3 = torch.randn(E, D, Fh, generator=gen) / math.sqrt(D)
        w2 = torch.randn(E, Fh, D, generator=gen) / math.sqrt(Fh)
        sl = slice(first, first + self.local)
        self.w1 = torch.nn.Parameter(w1[sl].clone())
        self.w3 = torch.nn.Parameter(w3[sl].clone())
        self.w2 = torch.nn.Parameter(w2[sl].clone())
        for p in self.parameters():
            p.expert = True  # reduced over the data-parallel group only

    def forward(self, x, idx, gate):
        """x [N, D]; idx, gate [N, 2]: each token's experts and weights."""
        ep, N, D = self.layout.ep, x.shape[0], x.shape[1]
        flat = idx.flatten()                     # [2N] expert of each slot
        dest = flat // self.local                # the rank that holds it
        cap = flat.numel()                       # room for every slot: none dropped
        send = x.new_zeros(ep * cap, D)
        send_id = torch.full((ep * cap,), -1, dtype=torch.int64)
        where = torch.empty_like(flat)
        for r in range(ep):
            slots = (dest == r).nonzero().flatten()
            where[slots] = r * cap + torch.arange(slots.numel())
            send_id[r * cap:r * cap + slots.numel()] = flat[slots] % self.local
        send = send.index_copy(0, where, x.repeat_interleave(2, 0))
        recv = dfn.all_to_all_single(torch.empty_like(send), send,
                                     group=self.layout.ep_group) \
            if ep > 1 else send
        recv_id = send_id
        if ep > 1:
            recv_id = torch.empty_like(send_id)
            dist.all_to_all_single(recv_id, send_id,
                                   group=self.layout.ep_group)
        out = torch.zeros_like(recv)
        for e in range(self.local):
            rows = (recv_id == e).nonzero().flatten()
            if rows.numel():
                h = recv[rows]
                y = (F.silu(h @ self.w1[e]) * (h @ self.w3[e])) @ self.w2[e]
                out = out.index_copy(0, rows, y)
        back = dfn.all_to_all_single(torch.empty_like(out), out,
                                     group=self.layout.ep_group) \
            if ep > 1 else out
        y = back[where].view(N, 2, D)
        return (gate.unsqueeze(-1) * y).sum(1)


class Block(torch.nn.Module):
    def __init__(self, layout, D, H, E, Fh, gen):
        super().__init__()
        self.H = H
        self.norm1 = torch.nn.LayerNorm(D)
        self.norm2 = torch.nn.LayerNorm(D)
        self.qkv = torch.nn.Linear(D, 3 * D, bias=False)
        self.proj = torch.nn.Linear(D, D, bias=False)
        self.router = torch.nn.Linear(D, E, bias=False)
        self.experts = Experts(layout, E, D, Fh, gen)
        self.drop = torch.nn.Dropout(0.1)

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(B, T, 3, self.H,
                                               D // self.H).unbind(2)
        att = torch.einsum("bthd,bshd->bhts", q, k) / math.sqrt(D // self.H)
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        x = x + self.drop(self.proj(
            torch.einsum("bhts,bshd->bthd", att, v).reshape(B, T, D)))
        h = self.norm2(x).reshape(B * T, D)
        top, idx = self.router(h).topk(2, -1)
        y = self.experts(h, idx, top.softmax(-1))
        return x + self.drop(y.view(B, T, D))


class MoE(torch.nn.Module):
    """Byte-level language model: V 256, D, L blocks of H heads, E experts
    of hidden size Fh, top-2 routing."""

    def __init__(self, layout, D=64, L=2, H=4, E=4, Fh=128, seed=0):
        super().__init__()
        torch.manual_seed(seed)             # the dense tensors: alike on every rank
        gen = torch.Generator().manual_seed(seed + 1)  # the experts
        self.emb = torch.nn.Embedding(256, D)
        self.blocks = torch.nn.ModuleList(
            Block(layout, D, H, E, Fh, gen) for _ in range(L))
        self.norm = torch.nn.LayerNorm(D)
        self.out = torch.nn.Linear(D, 256, bias=False)

    def forward(self, x, y):
        h = self.emb(x)
        for b in self.blocks:
            h = b(h)
        logits = self.out(self.norm(h))
        return F.cross_entropy(logits.flatten(0, 1), y.flatten())


# ---- data --------------------------------------------------------------------

class Corpus:
    """Windows of a text file's bytes; step s of rank r reads the windows
    a generator seeded by (seed, s, r) picks, so any step's batch is known
    without replaying the steps before it."""

    def __init__(self, path, T, B, rank, seed=0):
        with open(path, "rb") as f:
            self.data = torch.frombuffer(bytearray(f.read()),
                                         dtype=torch.uint8).long()
        if self.data.numel() <= T + 1:
            raise SystemExit(f"{path}: fewer than {T + 2} bytes")
        self.T, self.B, self.rank, self.seed = T, B, rank, seed

    def batch(self, step):
        g = torch.Generator().manual_seed(
            (self.seed * 1000003 + step) * 4099 + self.rank)
        at = torch.randint(0, self.data.numel() - self.T - 1, (self.B,),
                           generator=g)
        w = torch.stack([self.data[i:i + self.T + 1] for i in at.tolist()])
        return w[:, :-1], w[:, 1:]


# ---- the parallel step -------------------------------------------------------

def sync_gradients(model, layout):
    """Every gradient as the mean over the world: the dense ones summed
    over all ranks, an expert's over the ranks that hold it (its expert
    group already carried every token's share back to it)."""
    for p in model.parameters():
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        expert = getattr(p, "expert", False)
        dist.all_reduce(p.grad, group=layout.dp_group if expert else None)
        p.grad /= layout.world


def grad_norm(model, layout):
    """The norm of the whole model's gradient, the same on every rank."""
    dense = sum(float(p.grad.pow(2).sum()) for p in model.parameters()
                if not getattr(p, "expert", False))
    experts = torch.tensor([sum(float(p.grad.pow(2).sum())
                                for p in model.parameters()
                                if getattr(p, "expert", False))],
                           dtype=torch.float64)
    dist.all_reduce(experts, group=layout.ep_group)
    return math.sqrt(dense + float(experts))


def mean_over_ranks(value):
    t = torch.tensor([float(value)], dtype=torch.float64)
    dist.all_reduce(t)
    return float(t) / dist.get_world_size()


def digest(model):
    """A hash of this rank's parameters' bytes: equal runs, equal hashes."""
    h = hashlib.sha256()
    for name, p in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(p.detach().contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:16]
