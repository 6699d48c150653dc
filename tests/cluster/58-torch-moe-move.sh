#!/bin/bash
# The PyTorch example as a sigma job (contrib/examples/torch-moe/train.sbatch:
# two ranks under srun, expert-parallel over gloo, sigmatorch.Run). Its
# rank on n2 is slow (--slow-node: an accelerator there computes 4 times
# as long). Run's straggler test finds it and, escalating at once
# (SIGMA_STRAGGLER=escalate=0), the rank reports its node to sigmad
# (sigmactl slow), which takes it as an early warning for this job: it
# signals the job, every rank writes its snapshot and exits 75 at the same
# step, sigmad requeues the job off n2 onto a pool spare (n2 stays in
# service), and it resumes after that step and trains to the end, to the
# parameters a run never stopped (train_plain.py) ends with. (The probe's
# warning moves a PyTorch job the same way: contrib/demo torch.) The
# snapshots are node-local (/dev/shm, a directory per node): the rank on
# the spare has none, and the step of the stop comes from the job's
# shared tier (SIGMA_CKPT_DIR, every 100 steps and at the stop).
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
. "$SIGMA_SRCDIR/tests/cluster/sigmad-lib.sh"
PY=/usr/bin/python3
"$PY" -c 'import torch' 2>/dev/null || skip "python3-torch is not installed"
LIB=$SIGMA_BUILDDIR/lib/.libs/libsigma-runtime.so.0
[ -e "$LIB" ] || skip "libsigma-runtime is not built"
EX=$SIGMA_SRCDIR/contrib/examples/torch-moe

sigmad_fresh
d=$(workdir torch-moe)
local_root=/dev/shm/sigma-test-torch-moe-move
rm -rf "$local_root"
trap 'rm -rf "$local_root"' EXIT
head -c 3000 /usr/share/games/fortunes/fortunes > "$d/corpus.txt"
chmod 644 "$d/corpus.txt"
n=n2
jid=$(cd "$d" && run_as_user sbatch --parsable -o "$d/out" \
	--export="ALL,MOE_DATA=$d/corpus.txt,MOE_STEPS=600,MOE_CKPT_DIR=$local_root/%N,MOE_EXAMPLE_DIR=$EX,SIGMA_PYTHON=$PY,PYTHONPATH=$SIGMA_SRCDIR/python,PYTHONDONTWRITEBYTECODE=1,SIGMA_RUNTIME_LIB=$LIB,SIGMACTL=$SIGMACTL,SIGMA_CONF=$SIGMA_TESTBED_DIR/etc/sigma.conf,SIGMA_STRAGGLER=escalate=0,MOE_ARGS=--batch 4 --seq 16 --warmup 4 --log-every 1 --slow-node $n --slow-factor 4" \
	"$EX/train.sbatch") || fail "sbatch failed"
until_true 60 sh -c "grep -q '^step 1 ' '$d/out' 2>/dev/null" || fail "job $jid does not train: $(jstate "$jid"): $(tail -n 5 "$d/out")"
grep -q "^attempt 0 on n\[1-2\]" "$d/out" || fail "job $jid does not start on n1,n2: $(grep '^attempt' "$d/out")"
log "job $jid trains on $(jfield "$jid" NodeList), its rank on $n slow"
until_true 60 sh -c "grep -q 'as an early warning (sigmactl slow)' '$d/out'" ||
	fail "the slow rank did not report $n: $(grep -E 'straggl|slow' "$d/out" | tail -n 4)"
t0=$(date +%s.%N)
log "$(grep -m1 'as an early warning (sigmactl slow)' "$d/out")"
[ "$(events slow "$jid")" = 1 ] || fail "sigmad has no slow event for job $jid"
until_true 60 running_without "$jid" "$n" ||
	fail "job $jid not moved off $n: $(jstate "$jid") $(jfield "$jid" NodeList); $(tail -n 5 "$d/out")"
log "job $jid moved to $(jfield "$jid" NodeList)"
nstate "$n" | grep -q drain && fail "$n drained on a rank's report: $(nreason "$n")"
until_true 120 sh -c "sed -n '/^attempt 1 on /,\$p' '$d/out' | grep -q '^step '" ||
	fail "the moved job does not train: $(tail -n 5 "$d/out")"
log "recovery: $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s from the slow report to the first step on the spare"
stops=$(grep -c 'stopped after step [0-9]* on request: exit 75' "$d/out")
[ "$stops" = 2 ] || fail "$stops of 2 ranks said they stopped on request: $(grep -E 'stopped|exit|Error' "$d/out" | tail -n 6)"
at=$(sed -n 's/.*stopped after step \([0-9]*\) on request.*/\1/p' "$d/out" | sort -u)
[ "$(wc -l <<<"$at")" = 1 ] || fail "the ranks stopped at different steps: $at"
grep -q '^attempt 0: exit 75' "$d/out" || fail "the batch script did not leave with 75: $(grep '^attempt' "$d/out")"
until_true 240 sh -c "grep -q 'rank 0 done: step 600' '$d/out'" ||
	fail "the moved job did not finish: $(jstate "$jid"): $(tail -n 5 "$d/out")"
grep -q "sigmatorch: resumed after step $at\$" "$d/out" ||
	fail "the requeued job did not resume after step $at: $(grep -E 'resumed|^step 10 ' "$d/out")"
grep -q "sigmatorch: step $at read from the shared tier" "$d/out" ||
	fail "step $at was not read from the shared tier: $(grep sigmatorch: "$d/out" | tail -n 4)"
# the shared tier is the job's (the plugin's SIGMA_CKPT_DIR), its newest
# kept: every 100 steps, so 500 and 600 at the end
for r in 0 1; do
	got=$(ls "$SIGMA_TESTBED_DIR"/ckpt/*/*/sigmatorch-"$jid"/rank-$r 2>&1 | paste -sd' ')
	[ "$got" = "step-500.h5 step-500.h5.seal step-600.h5 step-600.h5.seal" ] ||
		fail "rank $r's shared tier holds: $got"
done
ac=$(scontrol show job "$jid" | sed -n 's/^ *AdminComment=//p')
echo "$ac" | grep -q "sigma: attempt 2: $n warning .* -> checkpointed, requeued onto n[56]" ||
	fail "AdminComment: $ac"
# a released spare is not exclusive: where Slurm started the job on idle
# primaries instead, the AdminComment says so after the account
spare=$(sed -n 's/.*sigma: attempt 2: .* requeued onto \(n[56]\).*/\1/p' <<<"$ac")
ran=$(sed -n 's/^attempt 1 on \([^ ]*\).*/\1/p' "$d/out" | head -n 1)
got=$(scontrol show hostnames "$ran" | paste -sd,)
if [[ ",$got," != *",$spare,"* ]]; then
	echo "$ac" | grep -q "sigma: attempt 2: ran on $got, not on the released spare $spare" ||
		fail "attempt 1 ran on $ran, not on $spare, and the AdminComment does not say so: $ac"
	log "attempt 1 ran on $ran, not on the released spare $spare, as the AdminComment says"
fi
log "stopped after step $at on both ranks, resumed there on the spare, done; $(grep 'rank 0 done' "$d/out")"

# the same training, never stopped, as the plain script: the same
# parameters, bit for bit, on both ranks
(cd "$d" && run_as_user env PYTHONDONTWRITEBYTECODE=1 OMP_NUM_THREADS=1 \
	srun -N2 --ntasks-per-node=1 --sigma-probe=off "$PY" "$EX/train_plain.py" \
	--data "$d/corpus.txt" --steps 600 --ep 2 --batch 4 --seq 16 --warmup 4 \
	--log-every 100 --ckpt-dir "$d/plain") > "$d/plain.out" 2>&1 ||
	fail "the plain run failed: $(tail -n 5 "$d/plain.out")"
for r in 0 1; do
	want=$(grep "^rank $r done: " "$d/plain.out")
	got=$(grep "^rank $r done: " "$d/out")
	[ -n "$want" ] && [ "$want" = "$got" ] ||
		fail "rank $r: moved \"$got\", never stopped \"$want\""
done
log "bitwise equal to the run never stopped: $(grep '^rank 0 done' "$d/plain.out")"
