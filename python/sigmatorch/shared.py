"""The shared tier of a PyTorch job's snapshots (docs/pytorch.md, "The
shared tier"): every `every` steps, the step a rank wrote to its
node-local tier is copied, file and seal as written, to
SHARED/rank-R on a file system every node sees, the newest `keep` kept.
A job requeued onto other nodes, which find their node-local tier empty,
resumes from there.

The copy is a file's (os.sendfile: no pass through Python, no second
copy of the state in memory), in a thread of its own, after the
node-local write is sealed: it never holds up a step. A copy that is
still going when the next step due arrives lets that one wait, and
only the newest waiting step is copied next: a slow file system means
fewer shared steps, never a slower loop. A copy that fails is said on
standard error and the loop goes on (the node-local tier still has the
step); wait() raises it while no later copy has succeeded. The seal
travels with the bytes and is checked when the step is loaded.
"""
import os
import sys
import threading

from ._files import SEAL, prune, publish


def _copy_from(src, size):
    """A fill for publish: size bytes of the open file src."""
    def fill(fd):
        at = 0
        while at < size:
            n = os.sendfile(fd, src, at, size - at)
            if n == 0:
                raise OSError(f"sigmatorch: {size - at} bytes short")
            at += n
    return fill


class Shared:
    """The copier of one rank: own is the runtime's DIR/rank-R, dest the
    shared tier's SHARED/rank-R; wait_written() returns once the step
    handed to the node-local writer is written."""

    def __init__(self, own, dest, every, keep, wait_written):
        if every < 1 or keep < 1:
            raise ValueError(f"sigmatorch: shared every={every} keep={keep}:"
                             " want 1 or more of each")
        self.own, self.dest = own, dest
        self.every, self.keep = int(every), int(keep)
        self._wait_written = wait_written
        self._cv = threading.Condition()
        self._due = None         # the newest step waiting to be copied
        self._busy = self._quit = False
        self._error = None
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name="sigmatorch-shared")
        self._thread.start()

    def after_save(self, step, force=False):
        """Step was handed to the writer: copy it once written, if due
        (or forced)."""
        if step % self.every and not force:
            return
        with self._cv:
            self._due = int(step)
            self._cv.notify_all()

    def _copy(self, step):
        name = f"step-{step}.h5"
        path = os.path.join(self.own, name)
        try:
            self._wait_written()
        except OSError:
            return  # the write failed: said at the Checkpoint's wait
        try:
            with open(path + SEAL, "rb") as f:
                seal = f.read()
            src = os.open(path, os.O_RDONLY)  # a prune now spares it
        except FileNotFoundError:
            return  # pruned already, behind a slow copy: a newer comes
        try:
            publish(self.dest, name, seal,
                    _copy_from(src, os.fstat(src).st_size))
        finally:
            os.close(src)
        prune(self.dest, self.keep)

    def _run(self):
        while True:
            with self._cv:
                while self._due is None and not self._quit:
                    self._cv.wait()
                if self._due is None:
                    return
                step, self._due, self._busy = self._due, None, True
            try:
                self._copy(step)
                self._error = None
            except Exception as e:  # said now, raised by wait()
                self._error = e
                print(f"sigmatorch: the copy of step {step} to the shared "
                      f"tier {self.dest} failed: {e}", file=sys.stderr,
                      flush=True)
            with self._cv:
                self._busy = False
                self._cv.notify_all()

    def wait(self):
        """The steps due are copied; OSError when the last copy failed."""
        with self._cv:
            while self._busy or self._due is not None:
                self._cv.wait()
        self._raise()

    def _raise(self):
        if self._error is not None:
            e, self._error = self._error, None
            raise OSError(f"sigmatorch: the copy to the shared tier "
                          f"{self.dest} failed: {e}") from e

    def close(self):
        """Copy what is due, then stop the thread."""
        with self._cv:
            self._quit = True
            self._cv.notify_all()
        self._thread.join()
