#!/bin/bash
# A rank killed with SIGKILL in the middle of a run of all-reduces (by
# itself, then from outside while every rank is inside a collective): the
# step must end, not hang, well within the collective timeout. Slurm's
# PMIx plugin sees the task die and cancels the step (srun exits 128+signal)
# or a surviving rank sees the broken connection first and exits 76
# (COMM_EXIT_PEER). The batch idiom of docs/distributed.md turns either
# into exit 76, the code the job is requeued on: checked through sbatch.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"

t=$SIGMA_BUILDDIR/tests/cluster/sigma-comm-test
[ -x "$t" ] || skip "sigma-comm-test not built"
grep -q '^#define HAVE_PMIX 1' "$SIGMA_BUILDDIR/config.h" || skip "built without PMIx"
grep -q '^#define HAVE_MPI 1' "$SIGMA_BUILDDIR/config.h" || skip "built without MPI"
need_srun_pmix

TIMEOUT=30
export SIGMA_COMM_TIMEOUT=$TIMEOUT

log "srun: rank 2 of 4 kills itself after 200 all-reduces"
t0=$(date +%s)
out=$(timeout 120 srun --mpi=pmix --kill-on-bad-exit=1 -N2 -n4 --ntasks-per-node=2 \
	"$t" loop --kill-rank 2 --after 200 2>&1)
rc=$?
secs=$(( $(date +%s) - t0 ))
echo "$out" | grep -v '^all-reduce' | tail -n 20
log "srun exit $rc after ${secs}s"
[ "$rc" != 124 ] || fail "the step was still running after 120 s: it hangs"
grep -q '^rank 2: SIGKILL to myself after 200 all-reduces' <<<"$out" || fail "rank 2 did not die as planned"
[ "$(grep -c '^rank [0-3] pid [0-9]* ready' <<<"$out")" = 4 ] || fail "not all ranks started"
[ "$secs" -le $((TIMEOUT + 15)) ] || fail "the step took ${secs}s to end (timeout ${TIMEOUT}s)"
# 76: a rank saw the failure; 128 + a signal: Slurm ended the step
[ "$rc" = 76 ] || [ "$rc" -gt 128 ] ||
	fail "srun exited $rc: expected 76 (a rank saw the failure) or 128 + a signal (Slurm ended the step)"

log "srun: rank 3 killed from outside while the ranks are in all-reduces"
out=$(workdir comm-kill-outside)/out
srun --mpi=pmix --kill-on-bad-exit=1 -N2 -n4 --ntasks-per-node=2 \
	"$t" loop --count 16384 > "$out" 2>&1 &
srun_pid=$!
until_true 60 grep -q '^all-reduce 100$' "$out" || { kill "$srun_pid"; fail "the loop did not start: $(tail -n 5 "$out")"; }
victim=$(sed -n 's/^rank 3 pid \([0-9]*\) ready$/\1/p' "$out")
[ -n "$victim" ] || { kill "$srun_pid"; fail "no pid of rank 3"; }
t0=$(date +%s)
kill -KILL "$victim"
until_true $((TIMEOUT + 15)) bash -c "! kill -0 $srun_pid 2>/dev/null" ||
	{ kill "$srun_pid"; fail "the step was still running $((TIMEOUT + 15))s after rank 3 died"; }
wait "$srun_pid"
rc=$?
secs=$(( $(date +%s) - t0 ))
grep -v '^all-reduce' "$out" | tail -n 8
log "srun exit $rc ${secs}s after the kill"
[ "$rc" = 76 ] || [ "$rc" -gt 128 ] || fail "srun exited $rc: expected 76 or 128 + a signal"

log "sbatch: the same failure ends the job with exit code 76"
d=$(workdir comm-kill)
cat > "$d/job.sh" <<JOB
#!/bin/bash
srun --mpi=pmix --kill-on-bad-exit=1 "$t" loop --kill-rank 1 --after 100
rc=\$?
# a rank killed by a signal: Slurm ended the step; requeue as for a peer failure
[ "\$rc" -gt 128 ] && rc=76
exit "\$rc"
JOB
chmod 755 "$d/job.sh"
job=$(sbatch --parsable -N2 -n4 --ntasks-per-node=2 -o "$d/out" -D "$d" \
	--export=ALL,SIGMA_COMM_TIMEOUT=$TIMEOUT "$d/job.sh") || fail "sbatch"
until_true $((TIMEOUT + 60)) bash -c "s=\$(scontrol show job $job | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'); [ \"\$s\" = FAILED ] || [ \"\$s\" = COMPLETED ]" ||
	fail "job $job still $(jstate "$job") after $((TIMEOUT + 60))s"
cat "$d/out" | grep -v '^all-reduce' | tail -n 10
code=$(jfield "$job" ExitCode)
log "job $job: $(jstate "$job") ExitCode=$code"
[ "$code" = "76:0" ] || fail "job $job ended with ExitCode=$code, want 76:0"
log "ok"
