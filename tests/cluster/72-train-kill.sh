#!/bin/bash
# A sigma-train rank killed with SIGKILL in the middle of a dp 2 run: the
# step ends within a bounded time, nothing hangs, and the batch idiom of
# docs/distributed.md ends the job with exit code 76 (requeue). Either a
# surviving rank sees the broken connection and exits 76 (COMM_EXIT_PEER)
# or Slurm's PMIx plugin tears the step down (srun 128 + a signal); the
# watchdog (SIGMA_COMM_TIMEOUT) is the backstop.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
need_train

TIMEOUT=30
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive SIGMA_COMM_TIMEOUT=$TIMEOUT
d=$(workdir train-kill)
"$TRAIN" prepare --train-out "$d/train.tok" --val-out "$d/val.tok" "$F/fortunes" >/dev/null ||
	fail "prepare failed"
ARGS="--train $d/train.tok --preset small --batch 8 --steps 1000000 --warmup 2 --threads 1 --log-every 10 --eval-every 0 --dp 2"

# victim OUT RANK: pid of RANK from the rank line it printed
victim() { sed -n "s/.*rank $2 of 2 on [^,]*, pid \([0-9]*\):.*/\1/p" "$1" | head -1; }

log "srun: rank 1 of a dp 2 run killed from outside after step 20"
out=$d/srun.out
srun --mpi=pmix --kill-on-bad-exit=1 -N2 -n2 "$TRAIN" $ARGS > "$out" 2>&1 &
srun_pid=$!
until_true 60 grep -q '^step 20/' "$out" || { kill "$srun_pid"; fail "training did not start: $(tail -n 5 "$out")"; }
pid=$(victim "$out" 1)
[ -n "$pid" ] || { kill "$srun_pid"; fail "no pid of rank 1: $(head -n 5 "$out")"; }
t0=$(date +%s)
kill -KILL "$pid"
until_true $((TIMEOUT + 15)) bash -c "! kill -0 $srun_pid 2>/dev/null" ||
	{ kill "$srun_pid"; fail "the step was still running $((TIMEOUT + 15))s after rank 1 died"; }
wait "$srun_pid"
rc=$?
secs=$(( $(date +%s) - t0 ))
tail -n 6 "$out"
log "srun exit $rc ${secs}s after the kill"
[ "$rc" = 76 ] || [ "$rc" -gt 128 ] ||
	fail "srun exited $rc: expected 76 (a rank saw the failure) or 128 + a signal (Slurm ended the step)"

log "srun: rank 1 stopped (SIGSTOP) after step 20: rank 0's watchdog ends the step with 76"
out=$d/stop.out
SIGMA_COMM_TIMEOUT=10 srun --mpi=pmix --kill-on-bad-exit=1 -N2 -n2 "$TRAIN" $ARGS > "$out" 2>&1 &
srun_pid=$!
until_true 60 grep -q '^step 20/' "$out" || { kill "$srun_pid"; fail "training did not start: $(tail -n 5 "$out")"; }
pid=$(victim "$out" 1)
[ -n "$pid" ] || { kill "$srun_pid"; fail "no pid of rank 1"; }
t0=$(date +%s)
kill -STOP "$pid"
until_true 40 bash -c "! kill -0 $srun_pid 2>/dev/null" ||
	{ kill -KILL "$pid"; kill "$srun_pid"; fail "the step was still running 40s after rank 1 stopped (timeout 10s)"; }
wait "$srun_pid"
rc=$?
secs=$(( $(date +%s) - t0 ))
grep -v '^step' "$out" | tail -n 6
log "srun exit $rc ${secs}s after the stop"
[ "$rc" = 76 ] || [ "$rc" -gt 128 ] || fail "srun exited $rc: expected 76 or 128 + a signal"
grep -q 'watchdog\|stuck\|timed out' "$out" || fail "no rank reported the stuck collective"

log "sbatch: the same failure ends the job with exit code 76"
cat > "$d/job.sh" <<JOB
#!/bin/bash
srun --mpi=pmix --kill-on-bad-exit=1 $TRAIN $ARGS > $d/job-srun.out 2>&1 &
srun_pid=\$!
for i in \$(seq 600); do grep -q '^step 20/' $d/job-srun.out && break; sleep 0.1; done
pid=\$(sed -n 's/.*rank 0 of 2 on [^,]*, pid \([0-9]*\):.*/\1/p' $d/job-srun.out | head -1)
[ -n "\$pid" ] && kill -KILL "\$pid"
wait "\$srun_pid"
rc=\$?
echo "srun exit \$rc"
# a rank killed by a signal: Slurm ended the step; requeue as for a peer failure
[ "\$rc" -gt 128 ] && rc=76
exit "\$rc"
JOB
chmod 755 "$d/job.sh"
job=$(sbatch --parsable -N2 -n2 -o "$d/job.out" -D "$d" \
	--export=ALL,SIGMA_COMM_TIMEOUT=$TIMEOUT "$d/job.sh") || fail "sbatch"
until_true $((TIMEOUT + 90)) bash -c "s=\$(scontrol show job $job | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'); [ \"\$s\" = FAILED ] || [ \"\$s\" = COMPLETED ]" ||
	{ scancel "$job"; fail "job $job still $(jstate "$job") after $((TIMEOUT + 90))s"; }
cat "$d/job.out"
tail -n 4 "$d/job-srun.out"
code=$(jfield "$job" ExitCode)
log "job $job: $(jstate "$job") ExitCode=$code"
[ "$code" = "76:0" ] || fail "job $job ended with ExitCode=$code, want 76:0"
log "ok"
