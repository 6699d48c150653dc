"""Which ranks are slow, for a PyTorch training loop (docs/tuner.md).

sigma-train's test of a slow rank, taken by libsigma-runtime over the time
each rank was busy in a step: the rank whose median over a window is well
above the ranks' median is a straggler. A rank that stays one reports its
own node to sigmad (sigmactl slow), whose warning path moves the job off
it, as sigma-train's tuner does:

    straggler = sigmatorch.Straggler()          # world and rank: torch's
    for step in range(start + 1, steps + 1):
        t0 = time.monotonic()
        loss = train_forward_backward(step)      # this rank's own work
        busy = time.monotonic() - t0
        opt.step()
        straggler.step(step, busy)              # all-gathers, judges, reports
"""
import ctypes
import sys

from . import _lib
from ._dist import device


class _Event(ctypes.Structure):
    _fields_ = [("rank", ctypes.c_int), ("slow", ctypes.c_int),
                ("ratio", ctypes.c_double), ("step", ctypes.c_long)]


def _world():
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist.get_world_size(), dist.get_rank()
    return 1, 0


class Straggler(_lib.Handle):
    """Straggler detection; settings as in sigma_runtime.h: window (10
    steps), slow (1.25), confirm (3), floor (0 s), escalate (60 s, 0 at
    once, "off" never). A bad setting raises ValueError naming it."""

    def __init__(self, world_size=None, rank=None, group=None, verbose=True,
                 **settings):
        w, r = _world()
        self.world_size = w if world_size is None else int(world_size)
        self.rank = r if rank is None else int(rank)
        self.group = group
        self.verbose = verbose
        words = " ".join(f"{k}={v}" for k, v in settings.items())
        super().__init__("straggler", self.world_size, self.rank,
                         words.encode())
        self._events = (_Event * self.world_size)()

    def _gather(self, busy):
        """Every rank's busy seconds, through torch.distributed."""
        if self.world_size == 1:
            return [float(busy)]
        import torch
        import torch.distributed as dist
        mine = torch.tensor([float(busy)], dtype=torch.float64,
                            device=device(self.group))
        out = [torch.empty_like(mine) for _ in range(self.world_size)]
        dist.all_gather(out, mine, group=self.group)
        return [t.item() for t in out]

    def record(self, step, busy_all):
        """Judge one step from every rank's busy seconds (a list, the same
        on every rank); returns [(rank, slow, ratio)] of the ranks whose
        state changed, and reports this rank's node when it is due."""
        if len(busy_all) != self.world_size:
            raise ValueError(f"sigmatorch: {len(busy_all)} times for "
                             f"{self.world_size} ranks")
        times = (ctypes.c_double * self.world_size)(*busy_all)
        n = _lib.lib.sigma_rt_straggler_record(self._handle, int(step), times,
                                               self.world_size, self._events)
        if n < 0:
            raise ValueError("sigmatorch: busy times must be finite and "
                             "not negative")
        changes = [(e.rank, bool(e.slow), e.ratio) for e in self._events[:n]]
        if self.verbose and self.rank == 0:
            for r, slow, ratio in changes:
                print(f"sigmatorch: step {step}: rank {r} "
                      f"{'slow' if slow else 'no longer slow'} "
                      f"({ratio:.2f}x the median step time)", flush=True)
        _lib.lib.sigma_rt_straggler_escalate(self._handle, int(step))
        return changes

    def step(self, step, busy):
        """This rank's busy seconds for step: all-gathered, then record()."""
        return self.record(step, self._gather(busy))

    def slow(self, rank):
        """Whether rank is confirmed slow."""
        return bool(_lib.lib.sigma_rt_straggler_slow(self._handle, rank))

    def ratio(self, rank):
        """rank's median busy time over the ranks' median (0 at first)."""
        return _lib.lib.sigma_rt_straggler_ratio(self._handle, rank)
