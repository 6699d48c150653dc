"""Everything a PyTorch loop needs to continue bit for bit, in the
node-local tier (docs/pytorch.md, "Checkpoints"): the model's state
(parameters and buffers), the optimizer's (its moments and step, its
parameter groups), the learning-rate scheduler's, the RNG states (CPU and
every CUDA device) and the loop's own position (JSON values: the step's
batch, an epoch, a data loader's offset).

    snap = sigmatorch.Snapshot("/dev/shm/ckpt", run=job_id, model=model,
                               optimizer=opt, scheduler=sched)
    start, position = snap.restore()     # (0, None): nothing to resume
    for step in range(start + 1, steps + 1):
        ...
        snap.save(step, {"batch": step})  # copied; written meanwhile

The tensors go by pointer to libsigma-runtime (sigmatorch.Checkpoint).
With an optimizer they are not even copied (copy=False): a thread of the
library writes the parameters and the optimizer's state as they are
while the next step's forward and backward passes run, and the
optimizer's step() waits for that write before it changes them (a hook
on it calls fence()). The buffers, which a forward pass may change, are
copied by save() itself. A loop that changes parameters other than
through the optimizer calls snap.fence() first. The structure
(parameter groups, scheduler, position, the names and shapes of the
optimizer's state) goes as one JSON entry, "meta". Nothing is pickled,
so a checkpoint file cannot run code when it is loaded.
"""
import json
import sys

from ._dist import everyone
from ._optim import around_step
from .checkpoint import Checkpoint

META = "meta"
# the runtime's dtype names as torch's
_TORCH_DTYPE = {"f32": "float32", "f64": "float64", "bf16": "bfloat16",
                "f16": "float16", "i64": "int64", "i32": "int32",
                "u8": "uint8", "bool": "bool"}


def _torch():
    import torch
    return torch


def _json_bytes(obj, what):
    try:
        return json.dumps(obj, allow_nan=True).encode()
    except TypeError as e:
        raise TypeError(f"sigmatorch: {what} cannot be saved as JSON: "
                        f"{e}") from e


class Snapshot:
    """A model, an optimizer and a scheduler (both may be None) kept in
    the node-local tier under directory for the run named run; rank and
    keep and replica as for Checkpoint. extra: {name: object} whose
    state_dict() is a dict of bytes (sigmatorch.Guard's), kept and given
    back alike. copy: False (the default with an optimizer: no copy,
    the write overlaps the next step and the optimizer's step waits for
    it) or True (save() copies; the default without an optimizer).
    shared, shared_every, shared_keep: the shared tier, as for
    Checkpoint; restore() takes its step where it is newer."""

    def __init__(self, directory, run, model, optimizer=None,
                 scheduler=None, rank=None, keep=2, extra=None,
                 replica=False, copy=None, shared=None, shared_every=1,
                 shared_keep=2):
        if copy is None:
            copy = optimizer is None
        if not copy and optimizer is None:
            raise ValueError("sigmatorch: copy=False needs the optimizer, "
                             "whose step waits for the write")
        self.checkpoint = Checkpoint(directory, run, rank=rank, keep=keep,
                                     replica=replica, copy=copy,
                                     shared=shared,
                                     shared_every=shared_every,
                                     shared_keep=shared_keep)
        self.model, self.optimizer, self.scheduler = (model, optimizer,
                                                      scheduler)
        self.extra = dict(extra or {})
        self.restored_from = None  # restore()'s tier: "node-local", "shared"
        self._params = {n for n, _ in model.named_parameters()}
        if not copy:
            around_step(optimizer, lambda: self.fence())

    def close(self):
        """Wait for the write in flight (OSError if it failed); free the
        library's object."""
        try:
            self.checkpoint.wait()
        finally:
            self.checkpoint.close()

    # ---- save ------------------------------------------------------------

    def _optimizer_table(self, table):
        sd = self.optimizer.state_dict()
        state = {}
        for pid, st in sd["state"].items():
            entry = {}
            for key, v in st.items():
                if hasattr(v, "data_ptr"):
                    table[f"optim.{pid}.{key}"] = v
                    entry[key] = ["tensor", str(v.dtype).split(".")[-1],
                                  list(v.shape), str(v.device)]
                else:
                    entry[key] = ["value", v]
            state[str(pid)] = entry
        return {"state": state, "param_groups": sd["param_groups"]}

    def fence(self):
        """The last save's tensors are in its file: the parameters and
        the optimizer's state may change (the optimizer's step() calls
        it)."""
        self.checkpoint.fence()

    def save(self, step, position=None, shared=False):
        """Copy the state as step's checkpoint (written in the
        background); position: the loop's own JSON values; shared=True:
        to the shared tier too, whatever shared_every says."""
        torch = _torch()
        # a buffer may change in the next forward pass: copied now
        table = {f"model.{k}": v if k in self._params else v.clone()
                 for k, v in self.model.state_dict().items()}
        meta = {"position": position}
        if self.optimizer is not None:
            meta["optimizer"] = self._optimizer_table(table)
        if self.scheduler is not None:
            meta["scheduler"] = self.scheduler.state_dict()
        meta["extra"] = {}
        for name, obj in self.extra.items():
            keys = meta["extra"][name] = []
            for key, blob in obj.state_dict().items():
                keys.append(key)
                table[f"extra.{name}.{key}"] = torch.frombuffer(
                    bytearray(blob), dtype=torch.uint8)
        table["rng.cpu"] = torch.get_rng_state()
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            for i, s in enumerate(torch.cuda.get_rng_state_all()):
                table[f"rng.cuda.{i}"] = s
            meta["cuda_devices"] = torch.cuda.device_count()
        raw = _json_bytes(meta, "the optimizer, scheduler or position")
        table[META] = torch.frombuffer(bytearray(raw), dtype=torch.uint8)
        self.checkpoint.save(step, table, shared=shared)

    def wait(self):
        """The write in flight is on disk; OSError if it failed."""
        self.checkpoint.wait()

    # ---- restore ---------------------------------------------------------

    @staticmethod
    def _empty(tier, step, name):
        """A tensor of the dtype and size name has in tier's step."""
        torch = _torch()
        dtype, shape = tier.shape(step, name)
        return torch.empty(shape, dtype=getattr(torch, _TORCH_DTYPE[dtype]))

    def _optimizer_state(self, saved, table):
        torch = _torch()
        state = {}
        for pid, entry in saved["state"].items():
            st = {}
            for key, (kind, *rest) in entry.items():
                if kind == "tensor":
                    dtype, shape, device = rest
                    t = torch.empty(shape, dtype=getattr(torch, dtype))
                    table[f"optim.{pid}.{key}"] = t
                    st[key] = (t, device)
                else:
                    st[key] = rest[0]
            state[int(pid)] = st
        return state

    def restore(self, group=None):
        """Load the newest step every rank has (all-gathered over group
        when torch.distributed is initialized), from the node-local tier
        or, where it is newer, the shared tier, into the model,
        optimizer, scheduler and RNG states. A step that any rank cannot
        load (refused, missing) is passed over for the next older one,
        by all ranks alike. Returns (step, position); (0, None) when no
        step is common to all ranks. ValueError when there were steps
        and none could be loaded."""
        failed = None
        for step, tier in self.checkpoint.restore_plan(group):
            try:
                read, err = self._read(step, tier), None
            except (ValueError, FileNotFoundError) as e:
                read, err = None, e
            where = "node-local" if tier is self.checkpoint else "shared"
            if everyone(err is None, group):
                self.restored_from = where
                return self._apply(step, *read)
            failed = failed or err or ValueError(
                f"sigmatorch: step {step}: another rank could not load it")
            print(f"sigmatorch: rank {self.checkpoint.rank}: step {step} "
                  f"of the {where} tier not restored "
                  f"({err or 'another rank could not'})", file=sys.stderr,
                  flush=True)
        if failed is not None:
            raise failed
        return 0, None

    def _read(self, step, tier):
        """Step's tensors from tier (a Checkpoint) into the model (in
        place) and into new tensors for the rest: (meta, table, state,
        extra)."""
        torch = _torch()
        raw = self._empty(tier, step, META)
        tier.load(step, {META: raw})
        meta = json.loads(raw.numpy().tobytes().decode())

        table = {f"model.{k}": v for k, v in
                 self.model.state_dict().items()}
        table["rng.cpu"] = torch.empty_like(torch.get_rng_state())
        for i in range(meta.get("cuda_devices", 0)):
            table[f"rng.cuda.{i}"] = self._empty(tier, step,
                                                 f"rng.cuda.{i}")
        state = None
        if self.optimizer is not None:
            state = self._optimizer_state(meta["optimizer"], table)
        extra = {name: {key: self._empty(tier, step, f"extra.{name}.{key}")
                        for key in keys}
                 for name, keys in meta.get("extra", {}).items()
                 if name in self.extra}
        for name, blobs in extra.items():
            table.update({f"extra.{name}.{k}": t for k, t in blobs.items()})
        with torch.no_grad():
            tier.load(step, table)
        return meta, table, state, extra

    def _apply(self, step, meta, table, state, extra):
        """A step read whole on every rank: the optimizer, scheduler,
        extras and RNG states take it. (step, position)."""
        torch = _torch()
        if self.optimizer is not None:
            self.optimizer.load_state_dict({
                "state": {pid: {k: (v[0].to(v[1]) if isinstance(v, tuple)
                                    else v) for k, v in st.items()}
                          for pid, st in state.items()},
                "param_groups": meta["optimizer"]["param_groups"]})
        if self.scheduler is not None:
            self.scheduler.load_state_dict(meta["scheduler"])
        for name, blobs in extra.items():
            self.extra[name].load_state_dict(
                {k: t.numpy().tobytes() for k, t in blobs.items()})
        torch.set_rng_state(table["rng.cpu"])
        ncuda = meta.get("cuda_devices", 0)
        if ncuda:
            torch.cuda.set_rng_state_all(
                [table[f"rng.cuda.{i}"] for i in range(ncuda)])
        return step, meta["position"]
