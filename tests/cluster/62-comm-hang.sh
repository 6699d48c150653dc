#!/bin/bash
# A rank that stops (SIGSTOP: a hung process or device) without closing its
# connections: neither MPI nor Slurm notices, so the surviving ranks'
# watchdog must end them with exit 76 (COMM_EXIT_PEER) once the all-reduce
# has run longer than SIGMA_COMM_TIMEOUT, and srun --kill-on-bad-exit=1
# then ends the step. Not before the timeout, and not much after.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"

t=$SIGMA_BUILDDIR/tests/cluster/sigma-comm-test
[ -x "$t" ] || skip "sigma-comm-test not built"
grep -q '^#define HAVE_PMIX 1' "$SIGMA_BUILDDIR/config.h" || skip "built without PMIx"
grep -q '^#define HAVE_MPI 1' "$SIGMA_BUILDDIR/config.h" || skip "built without MPI"
need_srun_pmix

TIMEOUT=8
export SIGMA_COMM_TIMEOUT=$TIMEOUT

log "rank 3 of 4 stops after 100 all-reduces; timeout ${TIMEOUT}s"
t0=$(date +%s)
out=$(timeout 120 srun --mpi=pmix --kill-on-bad-exit=1 -N2 -n4 --ntasks-per-node=2 \
	"$t" loop --stop-rank 3 --after 100 2>&1)
rc=$?
secs=$(( $(date +%s) - t0 ))
echo "$out" | grep -v '^all-reduce' | tail -n 20
log "srun exit $rc after ${secs}s"
[ "$rc" != 124 ] || fail "the step was still running after 120 s: it hangs"
grep -q '^rank 3: SIGSTOP to myself after 100 all-reduces' <<<"$out" || fail "rank 3 did not stop as planned"
grep -q "comm watchdog: allreduce on communicator world has not returned after [0-9.]* s (timeout $TIMEOUT.0 s): a peer rank died or stopped; exiting 76" <<<"$out" ||
	fail "no watchdog message"
grep -Eq 'tasks? [0-9-]+: Exited with exit code 76' <<<"$out" || fail "no rank exited 76"
[ "$secs" -ge "$TIMEOUT" ] || fail "the step ended after ${secs}s, before the timeout"
[ "$secs" -le $((TIMEOUT + 20)) ] || fail "the step took ${secs}s to end (timeout ${TIMEOUT}s)"
# 76, or 128 + the signal that ended the stopped rank (SIGTERM, SIGKILL, or
# SIGPIPE when it wakes up to closed pipes)
[ "$rc" = 76 ] || [ "$rc" -gt 128 ] || fail "srun exited $rc: expected 76 or 128 + a signal"
log "ok"
