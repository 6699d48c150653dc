"""Numerical guardrails for a PyTorch training loop (docs/guardrails.md).

The decisions are sigma-train's, taken by libsigma-runtime's guard over
the two numbers a loop has after its backward pass:

    guard = sigmatorch.Guard()               # sigma-train's defaults
    for step in range(start + 1, steps + 1):
        if guard.skip_data(step):            # a window a rollback skipped
            continue
        loss = model(batch).loss; loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        d = guard.check(step, loss, gnorm)   # the same numbers on every rank
        if d.recompute: ...                  # compute the step again, then
                                             #   guard.check(..., recomputed=True)
        if d.exit_code is not None:          # hardware (79) or gave up (70)
            job.exit(d.exit_code)
        if d.rollback: ...                   # reload; guard.rolled_back(ckpt, step)
        if not d.skip:
            for g in opt.param_groups: g["lr"] = lr * guard.lr_scale(step)
            opt.step()

guard.state_dict() and load_state_dict() carry the guard's windows and
counters in the job's checkpoint, so a resumed run judges its next steps as
the run that never stopped.
"""
import ctypes
import math

from . import _lib

RECOMPUTE = 0x01
SKIP = 0x02
LOWER_LR = 0x08
ROLLBACK = 0x10
REQUEUE = 0x20
STOP = 0x40


class _Event(ctypes.Structure):
    _fields_ = [("step", ctypes.c_long), ("actions", ctypes.c_uint),
                ("cause", ctypes.c_char * 24), ("value", ctypes.c_double),
                ("z", ctypes.c_double)]


def _setting(key, value):
    if isinstance(value, bool):
        value = "on" if value else "off"
    return f"{key}={value}"


class Decision:
    """What the guard decided for one step; false when all is well."""

    def __init__(self, event):
        self.step = event.step
        self.actions = event.actions
        self.cause = event.cause.decode() or None
        self.value = event.value
        self.z = event.z if math.isfinite(event.z) else None
        buf = ctypes.create_string_buffer(320)
        _lib.lib.sigma_rt_guard_describe(ctypes.byref(event), buf, len(buf))
        self._line = buf.value.decode()

    recompute = property(lambda self: bool(self.actions & RECOMPUTE))
    skip = property(lambda self: bool(self.actions & SKIP))
    lower_lr = property(lambda self: bool(self.actions & LOWER_LR))
    rollback = property(lambda self: bool(self.actions & ROLLBACK))

    @property
    def exit_code(self):
        """The job protocol's exit code the decision calls for, or None."""
        if self.actions & REQUEUE:
            return _lib.exit_code("hardware")
        if self.actions & STOP:
            return _lib.exit_code("diverged")
        return None

    def __bool__(self):
        return self.actions != 0

    def __str__(self):
        """sigma-train's log line: "guard: step S: CAUSE ...: ACTIONS"."""
        return self._line


class Guard(_lib.Handle):
    """The guardrails' decisions; settings as in sigma_runtime.h, e.g.
    Guard(window=50, z=6, lr_factor=0.5, rollback_after=3, recompute=True).
    A bad setting raises ValueError naming it."""

    def __init__(self, **settings):
        words = " ".join(_setting(k, v) for k, v in settings.items())
        super().__init__("guard", words.encode())

    def check(self, step, loss, grad_norm, recomputed=False):
        """Judge step (1-based) from its loss and gradient norm (floats or
        0-d tensors); returns a Decision."""
        ev = _Event()
        _lib.lib.sigma_rt_guard_check(self._handle, int(step), float(loss),
                                      float(grad_norm), int(bool(recomputed)),
                                      ctypes.byref(ev))
        return Decision(ev)

    def lr_scale(self, step):
        """The learning rate's factor for step: 1.0, or lower in a window."""
        return _lib.lib.sigma_rt_guard_lr_scale(self._handle, int(step))

    def rolled_back(self, ckpt_step, at_step):
        """The loop reloaded the checkpoint of ckpt_step at at_step."""
        _lib.lib.sigma_rt_guard_rolled_back(self._handle, int(ckpt_step),
                                            int(at_step))

    def skip_data(self, step):
        """Whether step's batch lies in a window that a rollback skips."""
        return bool(_lib.lib.sigma_rt_guard_skip_data(self._handle,
                                                      int(step)))

    def state_dict(self):
        """The guard's windows and counters, for the job's checkpoint."""
        n = _lib.lib.sigma_rt_guard_save(self._handle, None, 0)
        buf = ctypes.create_string_buffer(n)
        if _lib.lib.sigma_rt_guard_save(self._handle, buf, n) != n:
            raise RuntimeError("sigmatorch: the guard's state changed size")
        return {"sigma_guard": buf.raw}

    def load_state_dict(self, state):
        """Take back state_dict()'s state; ValueError, the guard unchanged,
        when it is not one."""
        blob = state.get("sigma_guard") if isinstance(state, dict) else None
        if not isinstance(blob, (bytes, bytearray)):
            raise ValueError("sigmatorch: not a guard's state_dict")
        err = ctypes.create_string_buffer(512)
        if _lib.lib.sigma_rt_guard_load(self._handle, bytes(blob), len(blob),
                                        err, len(err)) != 0:
            raise ValueError(f"sigmatorch: {err.value.decode()}")
