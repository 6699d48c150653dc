"""sigmatorch.Job (python/sigmatorch/job.py) against the job protocol
(docs/job-protocol.md), each case a real Python process over the built
libsigma-runtime: its records, its exit codes, SIGUSR1 as a request to stop
at a step boundary, and a bad records directory as a warning only.
"""
import os
import signal
import subprocess
import sys
import textwrap

from tree import BUILD, LIB, SRC


def contract():
    """The contract's numbers, as the build's sigma-contract-sh prints them."""
    out = subprocess.run([os.path.join(BUILD, "lib", "sigma-contract-sh")],
                         check=True, capture_output=True, text=True).stdout
    return dict((k, int(v)) for k, v in
                (line.split("=") for line in out.split()))


def run(script, records, extra_env=None, wait=True):
    """script in a fresh python3 with sigmatorch from this tree."""
    env = dict(os.environ, SIGMA_RUNTIME_LIB=LIB,
               PYTHONPATH=os.path.join(SRC, "python"),
               SLURMD_NODENAME="n7")
    env.pop("SIGMA_LAUNCH", None)
    if records is None:
        env.pop("SIGMA_JOB_RECORDS", None)
    else:
        env["SIGMA_JOB_RECORDS"] = str(records)
    env.update(extra_env or {})
    p = subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)],
                         env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    if not wait:
        return p
    out, err = p.communicate(timeout=60)
    return p.returncode, out, err


def record(records, rank):
    return (records / f"rank-{rank}").read_text().strip()


def test_exit_codes_are_the_contract():
    c = contract()
    rc, out, err = run("""
        import sigmatorch as s
        print(s.EXIT_OK, s.EXIT_FAILURE, s.EXIT_REQUEUE, s.EXIT_PEER,
              s.EXIT_HARDWARE)
    """, None)
    assert rc == 0, err
    assert [int(x) for x in out.split()] == [
        c["TRAIN_EXIT_OK"], c["TRAIN_EXIT_FAILURE"], c["TRAIN_EXIT_REQUEUE"],
        c["TRAIN_EXIT_PEER"], c["TRAIN_EXIT_HARDWARE"]]


def test_records_of_a_run(tmp_path):
    rc, out, err = run("""
        import sigmatorch
        with sigmatorch.Job(rank=3) as job:
            assert job.recording
            for step in range(4):
                job.step_done(step + 1)
    """, tmp_path, {"SIGMA_LAUNCH": "2"})
    assert rc == 0, err
    assert record(tmp_path, 3) == \
        "sigma-job 1 rank=3 node=n7 launch=2 step=4 state=exit code=0"


def test_no_records_without_the_launcher(tmp_path):
    rc, out, err = run("""
        import sigmatorch
        with sigmatorch.Job(rank=0) as job:
            assert not job.recording
            job.step_done(1)
    """, None)
    assert rc == 0, err
    assert list(tmp_path.iterdir()) == []


def test_sigusr1_stops_at_a_step_boundary(tmp_path):
    p = run("""
        import sys, time
        import sigmatorch
        with sigmatorch.Job(rank=1) as job:
            step = 0
            while True:
                time.sleep(0.05)          # a step
                step += 1
                job.step_done(step)
                print("step", step, flush=True)
                if job.stop_requested:
                    print("checkpoint", step, flush=True)
                    job.exit(sigmatorch.EXIT_REQUEUE)
    """, tmp_path, wait=False)
    assert p.stdout.readline().startswith("step ")
    p.send_signal(signal.SIGUSR1)
    out, err = p.communicate(timeout=60)
    assert p.returncode == contract()["TRAIN_EXIT_REQUEUE"], err
    last = out.split("\n")[-2]
    assert last.startswith("checkpoint ")
    step = int(last.split()[1])
    assert record(tmp_path, 1) == \
        f"sigma-job 1 rank=1 node=n7 launch=0 step={step} state=exit code=75"


def test_a_chosen_exit_outlives_sigterm(tmp_path):
    """srun --kill-on-bad-exit sends SIGTERM to the ranks still running
    once one left with 75; a rank already leaving with 75 itself must not
    turn into one killed by the signal (the batch script saw 143, not a
    request to requeue)."""
    rc, out, err = run("""
        import atexit, os, signal
        import sigmatorch
        atexit.register(lambda: os.kill(os.getpid(), signal.SIGTERM))
        with sigmatorch.Job(rank=0) as job:
            job.step_done(3)
            job.exit(sigmatorch.EXIT_REQUEUE)
    """, tmp_path)
    assert rc == contract()["TRAIN_EXIT_REQUEUE"], (rc, err)


def test_an_exception_is_a_failure(tmp_path):
    rc, out, err = run("""
        import sigmatorch
        with sigmatorch.Job(rank=0) as job:
            job.step_done(5)
            raise ValueError("a bug in the loop")
    """, tmp_path)
    assert rc == 1
    assert "a bug in the loop" in err
    assert record(tmp_path, 0).endswith(" step=5 state=exit code=1")


def test_a_bad_records_directory_warns_and_trains(tmp_path):
    rc, out, err = run("""
        import sigmatorch
        with sigmatorch.Job(rank=0) as job:
            assert not job.recording
            job.step_done(1)
        print("trained")
    """, "relative/records")
    assert rc == 0, err
    assert "trained" in out
    assert "SIGMA_JOB_RECORDS=relative/records: want an absolute path" in err


def test_rank_from_slurm(tmp_path):
    rc, out, err = run("""
        import sigmatorch
        with sigmatorch.Job() as job:
            print(job.rank)
    """, tmp_path, {"SLURM_PROCID": "6"})
    assert rc == 0, err
    assert out.strip() == "6"
    assert record(tmp_path, 6).startswith("sigma-job 1 rank=6 ")


def test_the_package_and_its_example_are_whole():
    """Every module imports, and the example's files are there (the
    tests that train with them are left out of distcheck)."""
    rc, out, err = run("""
        import sigmatorch, sigmatorch.replica
        print(sorted(sigmatorch.__all__))
    """, None)
    assert rc == 0, err
    example = os.path.join(SRC, "contrib", "examples", "torch-moe")
    for name in ("moe.py", "train_plain.py", "train_sigma.py",
                 "train.sbatch"):
        assert os.path.isfile(os.path.join(example, name)), name
