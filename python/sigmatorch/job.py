"""The job protocol (docs/job-protocol.md) for a PyTorch training loop.

    with sigmatorch.Job() as job:
        for step in range(start, steps):
            ...                      # one step
            job.step_done(step + 1)
            if job.stop_requested:   # SIGUSR1 or SIGTERM
                ...                  # save a checkpoint
                job.exit(sigmatorch.EXIT_REQUEUE)

A Job keeps this rank's record for sigma-launch, turns SIGUSR1 and SIGTERM
into a request to stop at the next step boundary, and leaves with the
protocol's exit codes: 75 stopped on request, 76 a peer rank was lost
(torch.distributed's DistBackendError), 1 any other exception.
"""
import ctypes
import os
import signal
import sys
import warnings

from . import _lib

EXIT_OK = _lib.exit_code("ok")
EXIT_FAILURE = _lib.exit_code("failure")
EXIT_DIVERGED = _lib.exit_code("diverged")
EXIT_REQUEUE = _lib.exit_code("requeue")
EXIT_PEER = _lib.exit_code("peer")
EXIT_HARDWARE = _lib.exit_code("hardware")


def _rank():
    """This process's rank: torch.distributed's, else Slurm's, else 0."""
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    for name in ("RANK", "SLURM_PROCID"):
        value = os.environ.get(name)
        if value is not None:
            if not value.isdigit():
                raise ValueError(f"sigmatorch: {name}={value!r}: want a rank")
            return int(value)
    return 0


def _peer_error(exc):
    """Whether exc is torch.distributed's word for a lost peer."""
    dist = sys.modules.get("torch.distributed")
    backend_error = getattr(dist, "DistBackendError", None) if dist else None
    return backend_error is not None and isinstance(exc, backend_error)


class Job:
    """This rank's side of the job protocol; see the module's text."""

    def __init__(self, rank=None, signals=(signal.SIGUSR1, signal.SIGTERM)):
        self.rank = _rank() if rank is None else int(rank)
        self.step = 0
        self.stop_requested = False
        self._stop_signal = None
        self._exited = False
        handle = ctypes.c_void_p()
        err = ctypes.create_string_buffer(512)
        rc = _lib.lib.sigma_rt_job_open(ctypes.byref(handle), self.rank, err,
                                        len(err))
        if rc != 0:
            # a hint to the launcher, never a reason to stop training
            warnings.warn(f"sigmatorch: {err.value.decode(errors='replace')}: "
                          "the launcher will not see this rank's progress",
                          RuntimeWarning, stacklevel=2)
            handle = ctypes.c_void_p()
        self._handle = handle
        self._old = {}
        for sig in signals:
            self._old[sig] = signal.signal(sig, self._on_signal)

    def _on_signal(self, signum, frame):
        self.stop_requested = True
        self._stop_signal = signum

    @property
    def recording(self):
        """Whether records are kept (sigma-launch set SIGMA_JOB_RECORDS)."""
        return bool(self._handle) and bool(
            _lib.lib.sigma_rt_job_recording(self._handle))

    def step_done(self, step):
        """Step `step` is done (its checkpoint, if any, taken)."""
        self.step = int(step)
        if self._handle:
            _lib.lib.sigma_rt_job_step(self._handle, self.step)

    def record_exit(self, code):
        """Record that this rank leaves with `code`, once."""
        if self._exited:
            return
        self._exited = True
        if self._handle:
            _lib.lib.sigma_rt_job_exit(self._handle, self.step, int(code))

    def exit(self, code):
        """Record `code` and leave with it (SystemExit)."""
        self.record_exit(code)
        sys.stdout.flush()
        raise SystemExit(code)

    def close(self, leaving=False):
        """Give the signals back and free the handle (no record).
        leaving: the process is on its way out with its code recorded;
        the stop signals are ignored from here, so that a launcher's
        SIGTERM to the ranks still running (srun --kill-on-bad-exit,
        once a first rank left) does not replace the code with a death
        by the signal."""
        for sig, old in self._old.items():
            signal.signal(sig, signal.SIG_IGN if leaving else old)
        self._old = {}
        if self._handle:
            _lib.lib.sigma_rt_job_close(self._handle)
            self._handle = ctypes.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        try:
            if exc is None:
                self.record_exit(EXIT_OK)
            elif isinstance(exc, SystemExit):
                code = exc.code
                self.record_exit(code if isinstance(code, int) else
                                 EXIT_OK if code is None else EXIT_FAILURE)
            elif _peer_error(exc):
                self.record_exit(EXIT_PEER)
                print(f"sigmatorch: rank {self.rank}: a peer rank was lost "
                      f"({exc}): exit {EXIT_PEER}", file=sys.stderr)
                raise SystemExit(EXIT_PEER) from exc
            else:
                self.record_exit(EXIT_FAILURE)
        finally:
            self.close(leaving=exc is not None)
        return False
