"""One object around a PyTorch training loop (docs/pytorch.md, "Run"):
the job protocol (Job), the node-local tier every step (Snapshot), the
guardrails (Guard) and the straggler report (Straggler), in the calls a
loop already has:

    with sigmatorch.Run(local_dir, job_id, model, opt, sched) as run:
        for step in run.steps(last):            # resumes; skips bad data
            t0 = time.monotonic()
            loss, gnorm = forward_backward(step)  # the same on every rank
            if run.check(step, loss, gnorm):    # the guard says: update
                opt.step()
            sched.step()
            run.step_done(step, time.monotonic() - t0)

check() leaves with the guard's exit code (79, 70) when it gives up,
reloads the newest step's snapshot when it rolls back, and in the window
after a spike has the optimizer's next step() use the learning rate times
the guard's factor (the scheduler's own value is left as it was).
step_done() snaps the state, records the step for sigma-launch, reports a
slow rank, and on SIGUSR1 or SIGTERM to any rank (agreed by all, under
torch.distributed) waits for the snapshot and leaves with 75.
"""
import os
import sys

from ._dist import everyone
from .guard import Guard
from .job import EXIT_REQUEUE, Job
from ._optim import around_step
from .snapshot import Snapshot
from .straggler import Straggler


class Run:
    """Job, Snapshot, Guard and Straggler for one loop. guard and
    straggler: their settings (dicts; the guard's recompute is off, since
    the loop, not the Run, would compute a step again); straggler=False:
    none; the environment's SIGMA_STRAGGLER ("escalate=0 slow=1.5", the
    words of Straggler's settings) goes under straggler's, so that a job
    script tunes it without touching the loop. rank, keep, replica,
    shared, shared_every, shared_keep: as for Snapshot, but shared=None
    (the default) is the job's checkpoint directory that sigma's Slurm
    plugin gives (SIGMA_CKPT_DIR, --sigma-ckpt-dir: SIGMA_CKPT_DIR/
    sigmatorch-RUN), every SIGMA_CKPT_EVERY steps (--sigma-ckpt-every),
    as sigma-train takes them; none without it, or with shared=False."""

    def __init__(self, directory, run, model, optimizer, scheduler=None,
                 guard=None, straggler=None, rank=None, keep=2,
                 replica=False, shared=None, shared_every=None,
                 shared_keep=2):
        shared, shared_every = _shared_tier(run, shared, shared_every)
        # the settings first: a bad one raises before any handler is set
        self.guard = Guard(**{"recompute": False, **(guard or {})})
        self.straggler = None if straggler is False else \
            Straggler(**{**_env_settings("SIGMA_STRAGGLER"),
                         **(straggler or {})})
        self.job = Job(rank)
        self.snapshot = Snapshot(directory, run, model, optimizer,
                                 scheduler, rank=self.job.rank, keep=keep,
                                 extra={"guard": self.guard},
                                 replica=replica, shared=shared,
                                 shared_every=shared_every,
                                 shared_keep=shared_keep)
        self.start, self.position = 0, None
        self._optimizer = optimizer
        self._lr_scale, self._lr_kept = 1.0, None
        around_step(optimizer, self._lr_lower, self._lr_restore)

    def steps(self, last):
        """The steps to run, after the newest one every rank has (restored
        first); a step whose batch a rollback skips is passed over."""
        self.start, self.position = self.snapshot.restore()
        if self.start and self.job.rank == 0:
            print(f"sigmatorch: resumed after step {self.start}",
                  file=sys.stderr, flush=True)
            if self.snapshot.restored_from == "shared":
                print(f"sigmatorch: step {self.start} read from the shared "
                      "tier", file=sys.stderr, flush=True)
        for step in range(self.start + 1, last + 1):
            if not self.guard.skip_data(step):
                yield step

    def check(self, step, loss, grad_norm):
        """The guard's judgement of step; True: apply the update."""
        d = self.guard.check(step, loss, grad_norm)
        if d and self.job.rank == 0:
            print(d, flush=True)
        if d.exit_code is not None:
            self.snapshot.wait()
            self.job.exit(d.exit_code)
        if d.rollback:
            back, _ = self.snapshot.restore()
            self.guard.rolled_back(back, step)
        update = not (d.skip or d.rollback)
        # the factor for this step's update (1 outside a lowered window)
        self._lr_scale = self.guard.lr_scale(step) if update else 1.0
        return update

    def _lr_lower(self):
        """Before the optimizer's step: the guard's factor on every
        group's learning rate, the values kept."""
        if self._lr_scale == 1.0 or self._lr_kept is not None:
            return
        groups = self._optimizer.param_groups
        self._lr_kept = [g["lr"] for g in groups]
        for g in groups:
            g["lr"] = g["lr"] * self._lr_scale

    def _lr_restore(self):
        """After it: the kept values back, so that the scheduler goes on
        from its own; the factor applies once per check()."""
        if self._lr_kept is not None:
            for g, lr in zip(self._optimizer.param_groups, self._lr_kept):
                g["lr"] = lr
        self._lr_kept, self._lr_scale = None, 1.0

    def step_done(self, step, busy=None, position=None):
        """After the update: the snapshot (written in the background), the
        record, the straggler test over busy seconds (this rank's own
        work, without waits in collectives where it can tell), and a stop
        on request (the step's snapshot then goes to the shared tier too,
        for a requeue onto other nodes)."""
        stop = self._stop_agreed()
        self.snapshot.save(step, position, shared=stop)
        self.job.step_done(step)
        if busy is not None and self.straggler is not None:
            self.straggler.step(step, busy)
        if stop:
            try:
                self.snapshot.wait()
            except OSError as e:  # the requeue resumes from what was kept
                print(f"sigmatorch: rank {self.job.rank}: step {step} not "
                      f"kept whole: {e}", file=sys.stderr, flush=True)
            print(f"sigmatorch: rank {self.job.rank}: stopped after step "
                  f"{step} on request: exit {EXIT_REQUEUE}", file=sys.stderr,
                  flush=True)
            self.job.exit(EXIT_REQUEUE)

    def _stop_agreed(self):
        """Whether any rank was asked to stop, agreed by all: Slurm's
        signal reaches the ranks at slightly different steps, and a rank
        that stopped alone would leave the others hanging in the next
        step's collectives."""
        return not everyone(not self.job.stop_requested)

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        try:
            self.snapshot.close()  # OSError: the last write failed
        finally:
            handled = self.job.__exit__(kind, exc, tb)
        return handled


def _shared_tier(run, shared, every):
    """The shared tier's directory and interval: as given, else the
    job's (SIGMA_CKPT_DIR and SIGMA_CKPT_EVERY); (None, 1) for none."""
    if shared is False:
        return None, 1
    if shared is None:
        root = os.environ.get("SIGMA_CKPT_DIR")
        if not root:
            return None, 1
        shared = os.path.join(root, f"sigmatorch-{run}")
        if every is None:
            env = os.environ.get("SIGMA_CKPT_EVERY", "100")
            try:
                every = int(env)
            except ValueError:
                raise ValueError(f"sigmatorch: SIGMA_CKPT_EVERY={env!r}: "
                                 "want a whole number") from None
    return shared, 1 if every is None else every


def _env_settings(name, reserved=("world_size", "rank", "group",
                                   "verbose")):
    """The words "key=value ..." of the environment's name as a dict; a
    word without "=", or a key that is not a setting, raises ValueError
    naming it."""
    out = {}
    for word in os.environ.get(name, "").split():
        key, eq, value = word.partition("=")
        if not eq or not key or key in reserved:
            raise ValueError(f"sigmatorch: {name}: {word!r} is not a "
                             f"setting (key=value)")
        out[key] = value
    return out
