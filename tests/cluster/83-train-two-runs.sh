#!/bin/bash
# Two jobs of the same name share the plugin's default checkpoint
# directory (ckpt_root/USER/JOBNAME) and never mix their runs. Job A trains
# to step 40. Job B of the same name, started plainly, is refused before
# its first step (exit 64, naming A's run and both choices) and leaves the
# directory as it was. Job C of the same name with --new-run moves A's
# files aside, is stopped by SIGUSR1 after a checkpoint (exit 75) and
# requeues itself: its attempt 1 resumes C's own step, never A's 40, and
# finishes. A's run is still whole in ckpt/.../run-ID and resumable.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
TRAIN=$SIGMA_BUILDDIR/trainer/sigma-train
F=/usr/share/games/fortunes
[ -x "$TRAIN" ] || skip "sigma-train not built"
[ -r "$F/fortunes" ] || skip "fortunes-min not installed"
grep -q 'sigma.so' "$SIGMA_TESTBED_DIR/etc/plugstack.conf" || skip "sigma.so not loaded"

d=$(workdir two-runs)
ck=$SIGMA_TESTBED_DIR/ckpt/$SIGMA_TEST_USER/tworuns
rm -rf "$ck"
train_corpus run_as_user
# job.sh STEPS [FLAGS...]: the trainer in the plugin's directory; exit 75
# requeues the job
cat > "$d/job.sh" <<JOB
#!/bin/bash
#SBATCH -N1 -c2 -J tworuns --requeue --open-mode=append --sigma-ckpt-every=10
trap 'echo "batch shell: USR1"' USR1
export OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive
steps=\$1
shift
srun $TRAIN --train $d/train.tok --preset small --batch 8 --lr 1e-3 \\
	--steps \$steps --warmup 10 --log-every 5 --eval-every 0 --threads 2 "\$@"
rc=\$?
echo "attempt \${SLURM_RESTART_COUNT:-0}: exit \$rc"
if [ \$rc -eq 75 ]; then
	scontrol requeue \$SLURM_JOB_ID
	sleep 60
fi
exit \$rc
JOB
submit() { (cd "$d" && run_as_user sbatch --parsable "$@"); }
run_of() { sed -n 's/^sigma-run 1 \([^ ]*\) .*/\1/p' "$1/run"; }

# A: a whole run
ja=$(submit --wait -o "$d/a.out" "$d/job.sh" 40) || fail "job A failed: $(tail -5 "$d/a.out")"
grep -q '^done: 40 steps' "$d/a.out" || fail "job A did not finish"
ra=$(run_of "$ck")
case $ra in "$ja"-????????????????) ;; *) fail "job A's run id is '$ra'" ;; esac
[ -f "$ck/ckpt-00000040.h5" ] || fail "no step 40 in $ck: $(ls "$ck")"
log "job $ja: run $ra, step 40 in $ck"
before=$(ls "$ck")

# B: the same name, plainly: refused before it trains
jb=$(submit --wait -o "$d/b.out" "$d/job.sh" 30) && fail "job B succeeded: $(tail -5 "$d/b.out")"
cat "$d/b.out"
grep -q 'attempt 0: exit 64' "$d/b.out" || fail "job B did not exit 64: $(grep attempt "$d/b.out")"
grep -q "holds the checkpoints of run $ra" "$d/b.out" || fail "job B's refusal does not name run $ra"
grep -q -- '--new-run' "$d/b.out" && grep -q -- '--resume' "$d/b.out" ||
	fail "job B's refusal does not name both choices"
grep -q '^step ' "$d/b.out" && fail "job B trained before it was refused"
[ "$(ls "$ck")" = "$before" ] || fail "job B changed $ck: $(ls "$ck")"
log "job $jb: refused with exit 64, $ck unchanged"

# C: the same name, a new run beside A; stopped, requeued, resumed
jc=$(submit -o "$d/c.out" "$d/job.sh" 300 --new-run) || fail "sbatch C failed"
until_true 120 grep -q '^step 25/' "$d/c.out" || fail "job C made no progress: $(tail -3 "$d/c.out")"
scancel --signal=USR1 --full "$jc" || fail "scancel --signal=USR1 failed"
until_true 120 grep -q 'attempt 0: exit' "$d/c.out" || fail "job C did not stop: $(tail -5 "$d/c.out")"
grep -q 'attempt 0: exit 75' "$d/c.out" || fail "job C's exit was not 75: $(grep attempt "$d/c.out")"
stopped=$(sed -n 's/^stopped by .* at step \([0-9]*\) after a checkpoint.*/\1/p' "$d/c.out")
[ -n "$stopped" ] || fail "no 'stopped by' line"
until_true 300 grep -q 'attempt 1: exit' "$d/c.out" || fail "job C's attempt 1 did not finish: $(tail -5 "$d/c.out")"
cat "$d/c.out"
grep -q "continuing at step $stopped\$" "$d/c.out" || fail "attempt 1 did not resume C's step $stopped"
# A's newest step is 40; C stopping at 40 itself (a slow machine) would
# make this check ambiguous, and the line above already pins the resume to
# C's own stop, and the run id below to C's run
if [ "$stopped" != 40 ]; then
	grep -q 'continuing at step 40$' "$d/c.out" && fail "job C resumed job A's step 40"
fi
grep -q 'attempt 1: exit 0' "$d/c.out" || fail "job C's attempt 1 failed"
grep -q '^done: 300 steps' "$d/c.out" || fail "job C did not finish"
rc=$(run_of "$ck")
case $rc in "$jc"-????????????????) ;; *) fail "$ck/run names '$rc', not a run of job $jc" ;; esac
[ -f "$ck/ckpt-00000300-a1.h5" ] || fail "no step 300 of attempt 1 in $ck: $(ls "$ck")"
[ "$(run_of "$ck/run-$ra")" = "$ra" ] || fail "A's run was not moved to $ck/run-$ra"
[ -f "$ck/run-$ra/ckpt-00000040.h5" ] && [ -f "$ck/run-$ra/ckpt-00000040.h5.seal" ] ||
	fail "A's step 40 is not in $ck/run-$ra: $(ls "$ck/run-$ra")"
log "job $jc: run $rc, stopped at $stopped and resumed there; A's run whole in run-$ra"

# A continues where it was, by a new job
ja2=$(submit --wait -o "$d/a2.out" --sigma-ckpt-dir="$ck/run-$ra" "$d/job.sh" 50 --resume) ||
	fail "job A2 failed: $(tail -5 "$d/a2.out")"
grep -q "continuing at step 40\$" "$d/a2.out" || fail "A's run did not resume at 40: $(grep -i resume "$d/a2.out")"
grep -q "run $ra: continued by job $ja2" "$d/a2.out" || fail "job $ja2 does not say it continues run $ra"
log "job $ja2: run $ra continued from step 40"
