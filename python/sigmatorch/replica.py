"""The buddy's replica of the node-local tier (docs/pytorch.md, "The
buddy's replica"): every step a rank writes, it sends, file and seal as
written, to the next rank (rank + 1, modulo the world), which keeps it in
DIR/replica-of-rank-R beside its own DIR/rank-R. A rank whose node was
lost, relaunched on a spare with an empty DIR, gets its steps back from
that buddy.

The transport is torch.distributed point-to-point on a process group of
its own (gloo, on the CPU, whatever the training's backend): it needs no
PyTorch built with MPI, and it runs in a thread of its own, beside the
next step, as the write does. The bytes are sent as written; the seal
travels with them and is checked when the step is loaded, wherever it
came from.
"""
import os
import queue
import threading
from datetime import timedelta

from ._files import SEAL, prune, publish, step_files, write_bytes


def _torch():
    import torch
    import torch.distributed as dist
    return torch, dist


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def _read_step(directory, name):
    """name's bytes and its seal's in directory; None for a missing one."""
    path = os.path.join(directory, name)
    return _read(path), _read(path + SEAL)


class Replica:
    """The replica exchange of one Checkpoint: own_dir is the runtime's
    DIR/rank-R; wait_written() returns once the step queued last is
    written (the Checkpoint's wait). Collective: every rank makes its
    Replica at the same point."""

    def __init__(self, directory, rank, keep, wait_written, timeout=120):
        torch, dist = _torch()
        self.world, self.rank, self.keep = dist.get_world_size(), rank, keep
        self.own = os.path.join(directory, f"rank-{rank}")
        self.left = (rank - 1) % self.world
        self.right = (rank + 1) % self.world
        self.held = os.path.join(directory, f"replica-of-rank-{self.left}")
        self.group = dist.new_group(backend="gloo",
                                    timeout=timedelta(seconds=timeout))
        self._wait_written = wait_written
        self._queue = queue.Queue()
        self._error = self._write_error = None
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name="sigmatorch-replica")
        self._thread.start()

    # ---- the exchange, every step ----------------------------------------

    def _swap(self, data, seal):
        """Send data and seal to the right, receive the left's; None for a
        step that was not written."""
        torch, dist = _torch()
        size = torch.tensor([-1, -1] if data is None or seal is None else
                            [len(data), len(seal)], dtype=torch.int64)
        theirs = torch.empty(2, dtype=torch.int64)
        req = dist.isend(size, self.right, group=self.group)
        dist.recv(theirs, self.left, group=self.group)
        req.wait()
        n, m = int(theirs[0]), int(theirs[1])
        out = torch.empty(max(n + m, 0), dtype=torch.uint8)
        reqs = []
        if size[0] >= 0:
            reqs.append(dist.isend(torch.frombuffer(
                bytearray(data + seal), dtype=torch.uint8), self.right,
                group=self.group))
        if n >= 0:
            dist.recv(out, self.left, group=self.group)
        for r in reqs:
            r.wait()
        if n < 0:
            return None
        raw = out.numpy().tobytes()
        return raw[:n], raw[n:]

    def _exchange(self, step):
        name = f"step-{step}.h5"
        data = seal = None
        try:
            self._wait_written()
            data, seal = _read_step(self.own, name)
        except OSError as e:  # the write failed: said at the next wait
            self._write_error = e
        # the buddy waits for this step all the same: told it has none
        got = self._swap(data, seal)
        if got is not None:
            publish(self.held, name, got[1], write_bytes(got[0]))
            prune(self.held, self.keep)

    def _run(self):
        while True:
            step = self._queue.get()
            try:
                if step is None:
                    return
                # once the exchange failed (a peer gone), no more of it:
                # the relaunch or requeue starts a new one
                if self._error is None:
                    self._exchange(step)
            except Exception as e:  # said at the next wait or save
                self._error = e
            finally:
                self._queue.task_done()

    def after_save(self, step):
        """Step was handed to the writer: replicate it once written."""
        self._raise()
        self._queue.put(int(step))

    def wait(self):
        """Every step queued is at the buddy; the exchange's failure, if
        one failed, raised as OSError."""
        self._queue.join()
        self._raise()

    def _raise(self):
        if self._write_error is not None:
            e, self._write_error = self._write_error, None
            raise e
        if self._error is not None:
            raise OSError(f"sigmatorch: the replica exchange with ranks "
                          f"{self.left} and {self.right} failed: "
                          f"{self._error}") from self._error

    def close(self):
        """Stop the thread once it is done with what was queued; False
        when it is still stuck in an exchange (a peer gone) after 5 s."""
        self._queue.put(None)
        self._thread.join(timeout=5)
        return not self._thread.is_alive()

    # ---- restore ---------------------------------------------------------

    def restorable_step(self, own_steps):
        """The newest step every rank has, itself or at its buddy; the
        ranks that lack it get it from the buddy first. None: none."""
        torch, dist = _torch()
        mine = (list(own_steps), step_files(self.held))
        every = [None] * self.world
        dist.all_gather_object(every, mine, group=self.group)
        have = [set(every[r][0]) | set(every[(r + 1) % self.world][1])
                for r in range(self.world)]
        common = set.intersection(*have)
        if not common:
            return None
        step = max(common)
        need = [step not in every[r][0] for r in range(self.world)]
        if need[self.rank] or need[self.left]:
            self._fetch(step, need)
        return step

    def _fetch(self, step, need):
        """The buddy sends this rank's step back (need[rank]); this rank
        sends the left's back (need[left])."""
        torch, dist = _torch()
        name = f"step-{step}.h5"
        reqs = []
        if need[self.left]:
            data, seal = _read_step(self.held, name)
            if data is None or seal is None:
                data, seal = b"", b""
            size = torch.tensor([len(data), len(seal)], dtype=torch.int64)
            reqs.append(dist.isend(size, self.left, group=self.group))
            reqs.append(dist.isend(torch.frombuffer(
                bytearray(data + seal or b"\0"), dtype=torch.uint8),
                self.left, group=self.group))
        if need[self.rank]:
            size = torch.empty(2, dtype=torch.int64)
            dist.recv(size, self.right, group=self.group)
            n, m = int(size[0]), int(size[1])
            out = torch.empty(max(n + m, 1), dtype=torch.uint8)
            dist.recv(out, self.right, group=self.group)
            raw = out.numpy().tobytes()
            if n == 0:
                raise FileNotFoundError(
                    f"sigmatorch: rank {self.right} lost the replica of "
                    f"rank {self.rank}'s step {step}")
            publish(self.own, name, raw[n:n + m], write_bytes(raw[:n]))
        for r in reqs:
            r.wait()
