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
    return lib


lib = _load()


def exit_code(name):
    """The job protocol's exit code called name ("ok", "requeue", ...)."""
    code = lib.sigma_rt_exit_code(name.encode())
    if code < 0:
        raise KeyError(f"sigmatorch: no exit code called {name!r}")
    return code
