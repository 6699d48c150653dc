"""The step files of a tier as the runtime publishes them, for the tiers
the package copies itself (the buddy's replica, the shared tier):
DIR/step-S.h5 beside its seal DIR/step-S.h5.seal, the seal published
first, each through a temporary that is synced and renamed, so that a
step is listed only once both are whole. Files are made 0600: a reader
refuses one that group or others may write, whatever the umask."""
import os

SEAL = ".seal"


def step_files(directory):
    """The steps of directory's published files (a seal beside each),
    newest first."""
    steps = []
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return steps
    for n in names:
        if n.startswith("step-") and n.endswith(".h5") and \
                n + SEAL in names:
            try:
                steps.append(int(n[5:-3]))
            except ValueError:
                pass
    return sorted(steps, reverse=True)


def _write(final, fill):
    tmp = final + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        fill(fd)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, final)


def publish(directory, name, seal, fill):
    """name (its bytes written by fill(fd)) and its seal (bytes) in
    directory, made if missing: the seal first."""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    final = os.path.join(directory, name)
    _write(final + SEAL, lambda fd: _write_all(fd, seal))
    _write(final, fill)
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def write_bytes(data):
    """A fill for publish: data as it is."""
    return lambda fd: _write_all(fd, data)


def prune(directory, keep):
    """All but the newest keep steps of directory removed, seal first."""
    for old in step_files(directory)[keep:]:
        for suffix in (SEAL, ""):
            try:
                os.unlink(os.path.join(directory, f"step-{old}.h5{suffix}"))
            except FileNotFoundError:
                pass
