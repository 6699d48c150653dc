"""The runtime library (libsigma-runtime, sigma_runtime.h) through ctypes.

It is found at $SIGMA_RUNTIME_LIB when that is set (a build tree's
lib/.libs/libsigma-runtime.so.0, for the tests), else where the dynamic
loader finds libsigma-runtime.so.0.
"""
import ctypes
import os

_SONAME = "libsigma-runtime.so.0"


def _load():
    path = os.environ.get("SIGMA_RUNTIME_LIB") or _SONAME
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise ImportError(
            f"sigmatorch: cannot load the runtime library {path}: {e} "
            "(install libsigma-runtime0, or set SIGMA_RUNTIME_LIB)") from e
    lib.sigma_rt_exit_code.argtypes = [ctypes.c_char_p]
    lib.sigma_rt_exit_code.restype = ctypes.c_int
    lib.sigma_rt_job_open.argtypes = [
        ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_char_p,
        ctypes.c_size_t]
    lib.sigma_rt_job_open.restype = ctypes.c_int
    lib.sigma_rt_job_recording.argtypes = [ctypes.c_void_p]
    lib.sigma_rt_job_recording.restype = ctypes.c_int
    lib.sigma_rt_job_step.argtypes = [ctypes.c_void_p, ctypes.c_long]
    lib.sigma_rt_job_step.restype = None
    lib.sigma_rt_job_exit.argtypes = [ctypes.c_void_p, ctypes.c_long,
                                      ctypes.c_int]
    lib.sigma_rt_job_exit.restype = None
    lib.sigma_rt_job_close.argtypes = [ctypes.c_void_p]
    lib.sigma_rt_job_close.restype = None
    _guard(lib)
    _straggler(lib)
    _ckpt(lib)
    return lib


def _ckpt(lib):
    c = ctypes
    handle = c.c_void_p
    lib.sigma_rt_ckpt_open.argtypes = [c.POINTER(handle), c.c_char_p,
                                       c.c_char_p, c.c_int, c.c_char_p,
                                       c.c_char_p, c.c_size_t]
    lib.sigma_rt_ckpt_open.restype = c.c_int
    for verb in ("save", "load"):
        fn = getattr(lib, f"sigma_rt_ckpt_{verb}")
        fn.argtypes = [handle, c.c_long, c.c_void_p, c.c_size_t, c.c_char_p,
                       c.c_size_t]
        fn.restype = c.c_int
    lib.sigma_rt_ckpt_load_resharded.argtypes = [handle, c.c_long, c.c_int,
                                                 c.c_void_p, c.c_size_t,
                                                 c.c_char_p, c.c_size_t]
    lib.sigma_rt_ckpt_load_resharded.restype = c.c_int
    lib.sigma_rt_ckpt_fence.argtypes = [handle]
    lib.sigma_rt_ckpt_fence.restype = None
    lib.sigma_rt_ckpt_wait.argtypes = [handle, c.c_char_p, c.c_size_t]
    lib.sigma_rt_ckpt_wait.restype = c.c_int
    lib.sigma_rt_ckpt_steps.argtypes = [handle, c.POINTER(c.c_long), c.c_int]
    lib.sigma_rt_ckpt_steps.restype = c.c_int
    lib.sigma_rt_ckpt_shape.argtypes = [handle, c.c_long, c.c_char_p,
                                        c.POINTER(c.c_int),
                                        c.POINTER(c.c_int),
                                        c.POINTER(c.c_int64), c.c_char_p,
                                        c.c_size_t]
    lib.sigma_rt_ckpt_shape.restype = c.c_int
    lib.sigma_rt_ckpt_close.argtypes = [handle]
    lib.sigma_rt_ckpt_close.restype = None


def _straggler(lib):
    c = ctypes
    handle = c.c_void_p
    lib.sigma_rt_straggler_open.argtypes = [c.POINTER(handle), c.c_int,
                                            c.c_int, c.c_char_p, c.c_char_p,
                                            c.c_size_t]
    lib.sigma_rt_straggler_open.restype = c.c_int
    lib.sigma_rt_straggler_record.argtypes = [handle, c.c_long, c.c_void_p,
                                              c.c_int, c.c_void_p]
    lib.sigma_rt_straggler_record.restype = c.c_int
    lib.sigma_rt_straggler_slow.argtypes = [handle, c.c_int]
    lib.sigma_rt_straggler_slow.restype = c.c_int
    lib.sigma_rt_straggler_ratio.argtypes = [handle, c.c_int]
    lib.sigma_rt_straggler_ratio.restype = c.c_double
    lib.sigma_rt_straggler_escalate.argtypes = [handle, c.c_long]
    lib.sigma_rt_straggler_escalate.restype = c.c_int
    lib.sigma_rt_straggler_close.argtypes = [handle]
    lib.sigma_rt_straggler_close.restype = None


def _guard(lib):
    c = ctypes
    handle = c.c_void_p
    lib.sigma_rt_guard_open.argtypes = [c.POINTER(handle), c.c_char_p,
                                        c.c_char_p, c.c_size_t]
    lib.sigma_rt_guard_open.restype = c.c_int
    lib.sigma_rt_guard_check.argtypes = [handle, c.c_long, c.c_double,
                                         c.c_double, c.c_int, c.c_void_p]
    lib.sigma_rt_guard_check.restype = c.c_uint
    lib.sigma_rt_guard_lr_scale.argtypes = [handle, c.c_long]
    lib.sigma_rt_guard_lr_scale.restype = c.c_double
    lib.sigma_rt_guard_rolled_back.argtypes = [handle, c.c_long, c.c_long]
    lib.sigma_rt_guard_rolled_back.restype = None
    lib.sigma_rt_guard_skip_data.argtypes = [handle, c.c_long]
    lib.sigma_rt_guard_skip_data.restype = c.c_int
    lib.sigma_rt_guard_describe.argtypes = [c.c_void_p, c.c_char_p,
                                            c.c_size_t]
    lib.sigma_rt_guard_describe.restype = None
    lib.sigma_rt_guard_save.argtypes = [handle, c.c_void_p, c.c_size_t]
    lib.sigma_rt_guard_save.restype = c.c_long
    lib.sigma_rt_guard_load.argtypes = [handle, c.c_char_p, c.c_size_t,
                                        c.c_char_p, c.c_size_t]
    lib.sigma_rt_guard_load.restype = c.c_int
    lib.sigma_rt_guard_close.argtypes = [handle]
    lib.sigma_rt_guard_close.restype = None


lib = _load()


class Handle:
    """A library object: opened by sigma_rt_KIND_open(&handle, *args, err,
    len), which raises ValueError with the library's reason, and freed by
    sigma_rt_KIND_close."""

    _handle = None

    def __init__(self, kind, *args):
        self._close = getattr(lib, f"sigma_rt_{kind}_close")
        handle = ctypes.c_void_p()
        err = ctypes.create_string_buffer(512)
        if getattr(lib, f"sigma_rt_{kind}_open")(ctypes.byref(handle), *args,
                                                 err, len(err)) != 0:
            raise ValueError(f"sigmatorch: {err.value.decode()}")
        self._handle = handle

    def close(self):
        """Free the library's object (once)."""
        if self._handle:
            self._close(self._handle)
            self._handle = None

    def __del__(self):
        self.close()


def exit_code(name):
    """The job protocol's exit code called name ("ok", "requeue", ...)."""
    code = lib.sigma_rt_exit_code(name.encode())
    if code < 0:
        raise KeyError(f"sigmatorch: no exit code called {name!r}")
    return code
