"""The node-local checkpoint tier for a PyTorch training loop
(docs/pytorch.md, "Checkpoints").

A rank's state is a flat table of named tensors: torch tensors (CPU or
CUDA) or NumPy arrays, of float32, float64, bfloat16, float16, int64,
int32, uint8 or bool. libsigma-runtime copies them when save() is called
and writes the copy in the background, as one sealed HDF5 file per rank
and step under DIR/rank-R, so the write overlaps the next step:

    ckpt = sigmatorch.Checkpoint("/dev/shm/ckpt", run=job_id)
    start = sigmatorch.Checkpoint.common_step(ckpt.steps())  # all ranks
    if start is not None:
        ckpt.load(start, state)          # state: {name: tensor}, in place
    for step in range(start + 1, steps + 1):
        ...
        ckpt.save(step, state)           # returns once copied

Tensors reach the library by pointer: no Python loop over elements. A
CUDA tensor is copied to host memory first. A file of another run (run=
differs), or with another dtype or shape, is refused with ValueError.
"""
import ctypes
import os
import socket
import sys

from . import _lib

F32, F64, BF16, F16, I64, I32, U8, BOOL = range(1, 9)
DTYPE_NAMES = {F32: "f32", F64: "f64", BF16: "bf16", F16: "f16", I64: "i64",
               I32: "i32", U8: "u8", BOOL: "bool"}
NDIM_MAX = 8

_NUMPY = {"<f4": F32, "<f8": F64, "<f2": F16, "<i8": I64, "<i4": I32,
          "|u1": U8, "|b1": BOOL}
_TORCH = {"torch.float32": F32, "torch.float64": F64,
          "torch.bfloat16": BF16, "torch.float16": F16,
          "torch.int64": I64, "torch.int32": I32, "torch.uint8": U8,
          "torch.bool": BOOL}


class _Tensor(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int),
                ("ndim", ctypes.c_int),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("data", ctypes.c_void_p),
                ("global_shape", ctypes.POINTER(ctypes.c_int64)),
                ("offset", ctypes.POINTER(ctypes.c_int64))]


class Shard:
    """A part of a larger tensor: its whole shape and where it starts."""

    def __init__(self, tensor, global_shape, offset):
        self.tensor = tensor
        self.global_shape = tuple(int(d) for d in global_shape)
        self.offset = tuple(int(d) for d in offset)


def _int64s(values):
    return (ctypes.c_int64 * max(len(values), 1))(*values)


def _is_torch(x):
    return type(x).__module__.split(".")[0] == "torch" and \
        hasattr(x, "data_ptr")


class _Entry:
    """One tensor as the C table sees it; holds what its pointers need."""

    def __init__(self, name, value, writing):
        shard = value if isinstance(value, Shard) else None
        x = shard.tensor if shard else value
        self.name, self.target, self.copy_back = name, x, False
        if _is_torch(x):
            dtype = _TORCH.get(str(x.dtype))
            host = x.detach()
            if host.device.type != "cpu" or not host.is_contiguous():
                # staged through host memory; a load copies it back
                host = host.to("cpu").contiguous()
                self.copy_back = not writing
            self.keep = host
            ptr, shape = host.data_ptr(), tuple(host.shape)
        elif hasattr(x, "__array_interface__"):
            ai = x.__array_interface__
            dtype = _NUMPY.get(ai["typestr"])
            if ai.get("strides") is not None:
                raise ValueError(f"sigmatorch: tensor {name}: not "
                                 "contiguous (numpy.ascontiguousarray)")
            if not writing and ai["data"][1]:
                raise ValueError(f"sigmatorch: tensor {name}: read-only")
            self.keep = x
            ptr, shape = ai["data"][0], tuple(ai["shape"])
        else:
            raise TypeError(f"sigmatorch: tensor {name}: a torch tensor or "
                            f"a NumPy array, not {type(x).__name__}")
        if dtype is None:
            raise TypeError(f"sigmatorch: tensor {name}: dtype "
                            f"{getattr(x, 'dtype', '?')} cannot be "
                            "checkpointed")
        if len(shape) > NDIM_MAX:
            raise ValueError(f"sigmatorch: tensor {name}: more than "
                             f"{NDIM_MAX} dimensions")
        self._shape = _int64s(shape)
        self.c = _Tensor(name.encode(), dtype, len(shape), self._shape,
                         ptr or None, None, None)
        if shard:
            if len(shard.global_shape) != len(shape) or \
                    len(shard.offset) != len(shape):
                raise ValueError(f"sigmatorch: tensor {name}: the shard's "
                                 "global shape and offset need "
                                 f"{len(shape)} dimensions")
            self._global = _int64s(shard.global_shape)
            self._offset = _int64s(shard.offset)
            self.c.global_shape, self.c.offset = self._global, self._offset

    def finish(self):
        """After a load into a staged copy: the copy back into the
        caller's tensor."""
        if self.copy_back:
            self.target.copy_(self.keep)


def _table(tensors, writing):
    if not hasattr(tensors, "items"):
        raise TypeError("sigmatorch: a mapping of names to tensors")
    entries = [_Entry(str(k), v, writing) for k, v in tensors.items()]
    table = (_Tensor * max(len(entries), 1))(*[e.c for e in entries])
    return entries, table


class Checkpoint(_lib.Handle):
    """This rank's node-local tier under directory (%N in it: the node's
    name), for the run named run (the same on every rank and attempt:
    the job's identity). keep: the
    newest steps kept (2). replica=True (under torch.distributed, every
    rank alike): each step also goes to the next rank's directory, the
    buddy's replica (sigmatorch.replica), from which a rank that lost
    its own gets it back on restore. copy=False: save() makes no copy
    of the tensors; the library's thread writes them as they are while
    the loop goes on, and the loop calls fence() before it changes any
    of them. shared=SHARED (%N as in directory): every shared_every
    steps, a step written is also copied to SHARED/rank-R
    (sigmatorch.shared), the newest shared_keep kept there, for a job
    requeued onto nodes that do not have its node-local tier."""

    def __init__(self, directory, run, rank=None, keep=2, replica=False,
                 copy=True, shared=None, shared_every=1, shared_keep=2):
        if rank is None:
            rank = _rank()
        self.rank = int(rank)
        self.replica = self.shared = self._shared_tier = None
        self._held = None  # a copy=False save's tensors, until fence()
        directory = node_dir(directory)
        super().__init__("ckpt", str(directory).encode(), str(run).encode(),
                         self.rank,
                         f"keep={keep} copy={'yes' if copy else 'no'}"
                         .encode())
        if replica:
            if keep < 2:
                raise ValueError("sigmatorch: a replica needs keep=2 or "
                                 "more (the step sent while the next is "
                                 "written)")
            from .replica import Replica
            self.replica = Replica(str(directory), self.rank, keep,
                                   self._wait_own)
        if shared is not None:
            from .shared import Shared
            own = os.path.join(directory, f"rank-{self.rank}")
            dest = os.path.join(node_dir(shared), f"rank-{self.rank}")
            if os.path.realpath(own) == os.path.realpath(dest):
                raise ValueError(f"sigmatorch: shared tier {shared} is "
                                 "the node-local one")
            # the shared tier's own object lists and loads its steps
            self._shared_tier = Checkpoint(shared, run, self.rank,
                                           keep=shared_keep)
            self.shared = Shared(own, dest, shared_every, shared_keep,
                                 self._wait_own)

    def close(self):
        """Free the library's object, once the replica's thread is done
        with it (a thread stuck on a lost peer keeps it: a leak, not a
        crash, on the way out)."""
        if self.shared is not None:
            self.shared.close()
            self._shared_tier.close()
            self.shared = self._shared_tier = None
        if self.replica is not None:
            done = self.replica.close()
            self.replica = None
            if not done:
                self._handle = None
                return
        super().close()

    def _call(self, fn, *args):
        err = ctypes.create_string_buffer(1024)
        rc = fn(self._handle, *args, err, len(err))
        if rc == -2:  # ENOENT
            raise FileNotFoundError(f"sigmatorch: {err.value.decode()}")
        if rc == -22 or rc == -74:  # EINVAL, EBADMSG
            raise ValueError(f"sigmatorch: {err.value.decode()}")
        if rc:
            raise OSError(-rc, f"sigmatorch: {err.value.decode()}")

    def save(self, step, tensors, shared=False):
        """Copy tensors ({name: tensor or Shard}) as step's checkpoint;
        the write goes on in the background. A write that failed before
        raises OSError here. shared=True: copied to the shared tier too,
        whatever shared_every says (a last step before a stop)."""
        entries, table = _table(tensors, writing=True)
        self._call(_lib.lib.sigma_rt_ckpt_save, int(step), table,
                   len(entries))
        self._held = entries  # with copy=False, read after this returns
        if self.replica is not None:
            self.replica.after_save(step)
        if self.shared is not None:
            self.shared.after_save(step, force=shared)

    def fence(self):
        """Returns once the last save's tensors are in its file: they
        may change from then on (at once unless copy=False)."""
        if self._held is not None:
            _lib.lib.sigma_rt_ckpt_fence(self._handle)
            self._held = None

    def _wait_own(self):
        # the replica's thread calls this too: it leaves _held alone
        self._call(_lib.lib.sigma_rt_ckpt_wait)

    def wait(self):
        """The write in flight is on disk, and with a replica at the
        buddy; OSError if either failed."""
        self.fence()
        self._wait_own()
        if self.replica is not None:
            self.replica.wait()
        if self.shared is not None:
            self.shared.wait()

    def restorable_step(self, group=None):
        """The newest step every rank can load: common_step over the
        ranks' own steps, or with a replica, over their own and their
        buddies' (a rank that lacks the step gets it from its buddy
        first). None when there is none. Collective."""
        if self.replica is not None:
            self.wait()  # the exchange's thread is done with the group
            return self.replica.restorable_step(self.steps())
        return Checkpoint.common_step(self.steps(), group)

    def restore_plan(self, group=None):
        """The steps to try on restore, newest first, as (step, tier):
        tier 1's restorable_step and the shared tier's steps that every
        rank has, tier 1 first where both have a step; tier is the
        Checkpoint that loads the step (self, or the shared tier's).
        Every rank gets the same list. Collective."""
        plan = []
        local = self.restorable_step(group)
        if local is not None:
            plan.append((local, self))
        if self._shared_tier is not None:
            self.wait()  # the copier is done: its steps are whole
            plan += [(step, self._shared_tier) for step in
                     Checkpoint.common_steps(self._shared_tier.steps(),
                                             group)]
        plan.sort(key=lambda p: (-p[0], p[1] is not self))
        return plan

    def steps(self):
        """The steps this rank has, newest first."""
        n = _lib.lib.sigma_rt_ckpt_steps(self._handle, None, 0)
        if n < 0:
            raise OSError(-n, "sigmatorch: cannot list the checkpoints")
        buf = (ctypes.c_long * max(n, 1))()
        n = _lib.lib.sigma_rt_ckpt_steps(self._handle, buf, n)
        return list(buf[:n])

    def shape(self, step, name):
        """What step's checkpoint holds as name: (dtype, shape), dtype one
        of "f32", "f64", "bf16", "f16", "i64", "i32", "u8", "bool"."""
        dtype, ndim = ctypes.c_int(), ctypes.c_int()
        shape = (ctypes.c_int64 * NDIM_MAX)()
        self._call(_lib.lib.sigma_rt_ckpt_shape, int(step), name.encode(),
                   ctypes.byref(dtype), ctypes.byref(ndim), shape)
        return DTYPE_NAMES[dtype.value], tuple(shape[:ndim.value])

    def load(self, step, tensors, writers=None):
        """Read step's checkpoint into tensors ({name: tensor or Shard}),
        in place. FileNotFoundError: no such step; ValueError: refused.

        writers=N: the step was written by N ranks (rank-0 .. rank-N-1
        under the directory, one every rank sees) and is read by name and
        place: each tensor or Shard gets its region's elements from
        whichever writers' shards hold them, so a job may come back on
        another number of ranks, or split its tensors another way.
        ValueError too when the writers do not cover a region whole."""
        entries, table = _table(tensors, writing=False)
        if writers is None:
            self._call(_lib.lib.sigma_rt_ckpt_load, int(step), table,
                       len(entries))
        else:
            self._call(_lib.lib.sigma_rt_ckpt_load_resharded, int(step),
                       int(writers), table, len(entries))
        for e in entries:
            e.finish()

    @staticmethod
    def common_step(steps, group=None):
        """The newest step that every rank has (steps: this rank's); with
        torch.distributed initialized, the ranks' lists are all-gathered
        (over group). None when there is none."""
        common = Checkpoint.common_steps(steps, group)
        return common[0] if common else None

    @staticmethod
    def common_steps(steps, group=None):
        """Every step that every rank has, newest first, gathered as
        common_step does."""
        lists = [list(steps)]
        dist = sys.modules.get("torch.distributed")
        if dist is not None and dist.is_available() and \
                dist.is_initialized():
            lists = [None] * dist.get_world_size(group)
            dist.all_gather_object(lists, list(steps), group=group)
        return Checkpoint.all_common(lists)

    @staticmethod
    def all_common(lists):
        """The steps in every one of lists (the ranks' steps), newest
        first."""
        common = set(lists[0]).intersection(*lists[1:]) if lists else ()
        return sorted(common, reverse=True)

    @staticmethod
    def newest_common(lists):
        """The newest step in every one of lists, or None."""
        common = Checkpoint.all_common(lists)
        return common[0] if common else None


def node_dir(directory):
    """directory with %N replaced by this node's name (SLURMD_NODENAME,
    else the host's short name): one path, a directory of each node's
    own, where nodes share a file system (a testbed on one machine)."""
    directory = str(directory)
    if "%N" in directory:
        node = os.environ.get("SLURMD_NODENAME") or \
            socket.gethostname().split(".")[0]
        directory = directory.replace("%N", node)
    return directory


def _rank():
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return 0
