"""sigmatorch.Checkpoint (python/sigmatorch/checkpoint.py) over the built
libsigma-runtime, with NumPy arrays (torch tensors take the same path by
data_ptr): a resumed loop continues bit for bit like the run that never
stopped, a checkpoint of another run or shape is refused, the newest
common step of several ranks, what cannot be checkpointed, and a
checkpoint of 2 ranks loaded by 4.
"""
import os

import numpy as np
import pytest

import tree

tree.use_tree()
import sigmatorch  # noqa: E402


def train_step(state, step):
    """One step of a tiny SGD loop with momentum, whose data and noise
    come from the state's own RNG, so that a resume must restore all of
    it to continue bit for bit."""
    rng = np.random.Generator(np.random.PCG64())
    rng.bit_generator.state = {
        "bit_generator": "PCG64",
        "state": {"state": int.from_bytes(state["rng"].tobytes()[:16],
                                          "little"),
                  "inc": int.from_bytes(state["rng"].tobytes()[16:],
                                        "little")},
        "has_uint32": 0, "uinteger": 0}
    x = rng.standard_normal(4).astype(np.float32)
    grad = (state["w"] @ x - 1.0) * x + state["w"] * np.float32(1e-3)
    state["m"][:] = np.float32(0.9) * state["m"] + grad
    state["w"][:] -= np.float32(0.05) * state["m"]
    s = rng.bit_generator.state["state"]
    state["rng"][:] = np.frombuffer(
        s["state"].to_bytes(16, "little") + s["inc"].to_bytes(16, "little"),
        dtype=np.uint8)
    state["step"][...] = step
    state["seen"][step % 8] = True


def fresh_state():
    g = np.random.Generator(np.random.PCG64(7))
    s = g.bit_generator.state["state"]
    return {
        "w": np.zeros(4, dtype=np.float32),
        "m": np.zeros(4, dtype=np.float32),
        "rng": np.frombuffer(s["state"].to_bytes(16, "little") +
                             s["inc"].to_bytes(16, "little"),
                             dtype=np.uint8).copy(),
        "step": np.zeros((), dtype=np.int64),
        "seen": np.zeros(8, dtype=bool),
        "half": np.arange(6, dtype=np.float16).reshape(2, 3),
    }


def test_resume_is_bitwise(tmp_path):
    whole = fresh_state()
    for step in range(1, 21):
        train_step(whole, step)

    state = fresh_state()
    ck = sigmatorch.Checkpoint(tmp_path, run="job-1", rank=0, keep=2)
    for step in range(1, 13):
        train_step(state, step)
        ck.save(step, state)
    ck.close()  # the process dies after step 12's save

    state = fresh_state()
    ck = sigmatorch.Checkpoint(tmp_path, run="job-1", rank=0)
    assert ck.steps() == [12, 11]
    start = sigmatorch.Checkpoint.common_step(ck.steps())
    assert start == 12
    ck.load(start, state)
    for step in range(start + 1, 21):
        train_step(state, step)
    for name in whole:
        assert whole[name].tobytes() == state[name].tobytes(), name


def test_a_directory_of_each_node(tmp_path, monkeypatch):
    """%N names the node: ranks on two nodes of one file system keep
    apart, as on nodes of their own."""
    for node in ("n1", "n2"):
        monkeypatch.setenv("SLURMD_NODENAME", node)
        ck = sigmatorch.Checkpoint(tmp_path / "%N", run="job-1", rank=0)
        ck.save(1 if node == "n1" else 2, fresh_state())
        ck.close()
    assert sorted(os.listdir(tmp_path)) == ["n1", "n2"]
    assert sorted(os.listdir(tmp_path / "n2" / "rank-0")) == [
        "step-2.h5", "step-2.h5.seal"]


def test_another_run_is_refused(tmp_path):
    ck = sigmatorch.Checkpoint(tmp_path, run="job-1", rank=3)
    ck.save(5, fresh_state())
    ck.wait()
    other = sigmatorch.Checkpoint(tmp_path, run="job-2", rank=3)
    with pytest.raises(ValueError, match="run job-1, not of this run"):
        other.load(5, fresh_state())
    with pytest.raises(FileNotFoundError, match="no checkpoint of step 6"):
        ck.load(6, fresh_state())


def test_shape_and_dtype_must_match(tmp_path):
    ck = sigmatorch.Checkpoint(tmp_path, run="r", rank=0)
    ck.save(1, {"w": np.zeros(4, dtype=np.float32)})
    with pytest.raises(ValueError, match="w has shape.0. = 4 in the file"):
        ck.load(1, {"w": np.zeros(5, dtype=np.float32)})
    with pytest.raises(ValueError, match="w is f32 with 1 dimensions"):
        ck.load(1, {"w": np.zeros(4, dtype=np.float64)})


def test_what_cannot_be_checkpointed(tmp_path):
    ck = sigmatorch.Checkpoint(tmp_path, run="r", rank=0)
    with pytest.raises(TypeError, match="dtype complex64"):
        ck.save(1, {"z": np.zeros(2, dtype=np.complex64)})
    with pytest.raises(TypeError, match="not list"):
        ck.save(1, {"l": [1, 2]})
    with pytest.raises(ValueError, match="not contiguous"):
        ck.save(1, {"t": np.zeros((4, 4), dtype=np.float32).T})
    with pytest.raises(ValueError, match="its name"):
        ck.save(1, {"a/b": np.zeros(1, dtype=np.float32)})
    frozen = np.zeros(2, dtype=np.float32)
    ck.save(1, {"f": frozen})
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        ck.load(1, {"f": frozen})
    with pytest.raises(ValueError, match="run name"):
        sigmatorch.Checkpoint(tmp_path, run="../x", rank=0)
    with pytest.raises(ValueError, match="keep=0"):
        sigmatorch.Checkpoint(tmp_path, run="r", rank=0, keep=0)


def test_a_shard_keeps_its_place(tmp_path):
    ck = sigmatorch.Checkpoint(tmp_path, run="r", rank=1)
    part = np.arange(6, dtype=np.float32).reshape(2, 3)
    ck.save(1, {"e": sigmatorch.Shard(part, (4, 3), (2, 0))})
    back = np.zeros_like(part)
    ck.load(1, {"e": sigmatorch.Shard(back, (4, 3), (2, 0))})
    assert back.tobytes() == part.tobytes()
    with pytest.raises(ValueError, match="outside its global shape"):
        ck.save(2, {"e": sigmatorch.Shard(part, (4, 3), (3, 0))})


def test_loaded_on_another_number_of_ranks(tmp_path):
    # 2 ranks saved an 8x3 table as row halves; 4 ranks load it as row
    # quarters, one rank whole, and a bf16 tensor as bytes the same way
    full = np.arange(24, dtype=np.float32).reshape(8, 3)
    for r in range(2):
        ck = sigmatorch.Checkpoint(tmp_path, run="r", rank=r)
        ck.save(3, {"e": sigmatorch.Shard(full[4 * r:4 * r + 4].copy(),
                                          (8, 3), (4 * r, 0)),
                    "step": np.array(3, dtype=np.int64)})
        ck.close()
    for r in range(4):
        ck = sigmatorch.Checkpoint(tmp_path, run="r", rank=r)
        part, step = np.zeros((2, 3), np.float32), np.zeros((), np.int64)
        ck.load(3, {"e": sigmatorch.Shard(part, (8, 3), (2 * r, 0)),
                    "step": step}, writers=2)
        assert part.tobytes() == full[2 * r:2 * r + 2].tobytes()
        assert int(step) == 3
        ck.close()
    whole = np.zeros((8, 3), np.float32)
    ck = sigmatorch.Checkpoint(tmp_path, run="r", rank=0)
    ck.load(3, {"e": whole}, writers=2)
    assert whole.tobytes() == full.tobytes()
    with pytest.raises(ValueError, match="hold 12 of its 24 elements"):
        ck.load(3, {"e": whole}, writers=1)
    with pytest.raises(FileNotFoundError, match="by rank 2"):
        ck.load(3, {"e": whole}, writers=3)


def test_common_step_of_several_ranks():
    newest = sigmatorch.Checkpoint.newest_common
    # rank 1 lost step 9 (its node died during the write)
    assert newest([[9, 8], [8, 7], [9, 8]]) == 8
    assert newest([[9], [8]]) is None
    assert newest([]) is None
    assert sigmatorch.Checkpoint.common_step([9, 8]) == 9
