#!/bin/bash
# Trouble that follows the hardware, under Slurm: a step whose gradient is
# NaN the first time and clean when recomputed (SIGMA_GUARD_INJECT=flaky,
# the first attempt only: the fault stays with that node) makes
# sigma-train exit 79. The test does what the controller does with 79:
# it requeues the job away from the node; the second attempt runs on
# another node, resumes from the last checkpoint by itself and finishes
# (a hardware exit writes no checkpoint: the step is redone there).
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
TRAIN=$SIGMA_BUILDDIR/trainer/sigma-train
F=/usr/share/games/fortunes
[ -x "$TRAIN" ] || skip "sigma-train not built"
[ -r "$F/fortunes" ] || skip "fortunes-min not installed"

d=$(workdir train-guard-hw)
train_corpus run_as_user
cat > "$d/job.sh" <<JOB
#!/bin/bash
#SBATCH -N1 -c2 -J guard-hw --requeue --open-mode=append
export OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive
if [ "\${SLURM_RESTART_COUNT:-0}" = 0 ]; then
	export SIGMA_GUARD_INJECT=flaky@35
fi
srun $TRAIN --train $d/train.tok --preset small --batch 4 --steps 60 \\
	--warmup 5 --log-every 10 --eval-every 0 --threads 2 \\
	--ckpt-dir $d/ckpt --ckpt-every 20
rc=\$?
echo "attempt \${SLURM_RESTART_COUNT:-0} on \$SLURMD_NODENAME: exit \$rc"
# on 79, wait for the requeue (done below as the controller would)
[ \$rc -eq 79 ] && sleep 300
exit \$rc
JOB
jid=$(cd "$d" && run_as_user sbatch --parsable -o "$d/out" "$d/job.sh") || fail "sbatch failed"
until_true 180 grep -q 'attempt 0 on .*: exit' "$d/out" || fail "the first attempt did not end: $(tail -5 "$d/out")"
grep -q 'attempt 0 on .*: exit 79' "$d/out" || fail "exit was not 79: $(grep attempt "$d/out")"
grep -q '^guard: step 35: hardware' "$d/out" || fail "no hardware event logged"
n0=$(sed -n 's/^attempt 0 on \(.*\): exit.*/\1/p' "$d/out")
log "attempt 0 on $n0 exited 79"
# the controller's answer to 79: requeue away from the node
scontrol requeuehold "$jid" || fail "scontrol requeuehold failed"
scontrol update jobid="$jid" excnodelist="$n0" || fail "cannot exclude $n0"
scontrol release "$jid" || fail "scontrol release failed"
until_true 300 grep -q 'attempt 1 on .*: exit' "$d/out" || fail "the requeued job did not finish: $(tail -5 "$d/out")"
cat "$d/out"
n1=$(sed -n 's/^attempt 1 on \(.*\): exit.*/\1/p' "$d/out")
[ "$n1" != "$n0" ] || fail "the requeued job ran on the same node $n0"
grep -q 'continuing at step 20$' "$d/out" || fail "the requeued run did not resume at step 20"
grep -q 'attempt 1 on .*: exit 0' "$d/out" || fail "the resumed run failed"
grep -q '^done: 60 steps' "$d/out" || fail "the resumed run did not finish"
until_true 60 is_state "$jid" COMPLETED || fail "job $jid is $(jstate "$jid")"
log "attempt 1 on $n1 resumed at step 20 and finished"
