#!/bin/bash
# The PyTorch example under sigma-launch (contrib/examples/torch-moe/
# train.sbatch with --no-kill --sigma-restart=in-job, 2 ranks and an
# in-allocation spare), through the faults a loop meets:
#   1. a NaN loss, then a loss spike three steps long: the guard skips the
#      NaN's update, and rolls back to the newest snapshot on the spike;
#   2. a rank killed on a healthy node: sigma-launch relaunches the step on
#      the same nodes, inside the allocation, and it resumes from the
#      node-local snapshot, at most a step behind the kill; training ends.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
. "$SIGMA_SRCDIR/tests/cluster/sigmad-lib.sh"
PY=/usr/bin/python3
"$PY" -c 'import torch' 2>/dev/null || skip "python3-torch is not installed"
LIB=$SIGMA_BUILDDIR/lib/.libs/libsigma-runtime.so.0
LAUNCHER=$SIGMA_BUILDDIR/trainer/sigma-launch
[ -e "$LIB" ] && [ -x "$LAUNCHER" ] || skip "libsigma-runtime or sigma-launch is not built"
grep -q '^required' "$SIGMA_TESTBED_DIR/etc/plugstack.conf" 2>/dev/null || skip "the plugin is not loaded"
EX=$SIGMA_SRCDIR/contrib/examples/torch-moe

sigmad_fresh
d=$(workdir torch-moe-injob)
head -c 3000 /usr/share/games/fortunes/fortunes > "$d/corpus.txt"
chmod 644 "$d/corpus.txt"
out=$d/out
env="ALL,MOE_DATA=$d/corpus.txt,MOE_STEPS=500,MOE_CKPT_DIR=$d/ckpt,MOE_EXAMPLE_DIR=$EX"
env="$env,SIGMA_PYTHON=$PY,PYTHONPATH=$SIGMA_SRCDIR/python,PYTHONDONTWRITEBYTECODE=1,SIGMA_RUNTIME_LIB=$LIB"
env="$env,SIGMA_LAUNCHER=$LAUNCHER,SIGMA_PROBE=$PROBE,SIGMACTL=$SIGMACTL,SIGMA_CONF=$SIGMA_TESTBED_DIR/etc/sigma.conf"
env="$env,MOE_ARGS=--batch 4 --seq 16 --warmup 4 --log-every 1 --inject-nan 40 --inject-spike 80"
jid=$(cd "$d" && run_as_user sbatch --parsable -N3 --no-kill --sigma-restart=in-job \
	--sigma-job-spares=1 --sigma-max-restarts=3 -o "$out" --export="$env" "$EX/train.sbatch") ||
	fail "sbatch failed"
at_step() { grep -q "^step $1 " "$out" 2>/dev/null; }
last_step() { sed -n 's/^step \([0-9]*\) .*/\1/p' "$out" | tail -n 1; }
until_true 180 at_step 120 || fail "job $jid does not train past step 120: $(jstate "$jid"): $(tail -n 5 "$out")"
mapfile -t N < <(job_nodes "$jid")
grep -q "^sigma-launch: launch 0 .* on ${N[0]},${N[1]} (in-allocation spares: ${N[2]})" "$out" ||
	fail "launch 0 not on the first two nodes: $(grep sigma-launch "$out")"

# 1. the guard
grep -q '^guard: step 40: non-finite value nan: skip$' "$out" ||
	fail "the NaN at step 40 was not skipped: $(grep '^guard' "$out")"
grep -q '^guard: step 8[0-2]: loss-spike .*rollback' "$out" ||
	fail "the spike at step 80 did not roll back: $(grep '^guard' "$out")"
log "guard: $(grep '^guard' "$out" | paste -sd';')"

# 2. a rank killed on a healthy node
pid=
for p in $(pgrep -f "$EX/train_sigma.py"); do
	grep -qzx "SLURMD_NODENAME=${N[1]}" "/proc/$p/environ" 2>/dev/null || continue
	grep -qzx "SLURM_JOB_ID=$jid" "/proc/$p/environ" 2>/dev/null && { pid=$p; break; }
done
[ -n "$pid" ] || fail "no rank of job $jid on ${N[1]}"
at=$(last_step)
t0=$(date +%s.%N)
kill -KILL "$pid"
log "killed the rank on ${N[1]} (pid $pid) at step $at"
until_true 60 sh -c "grep -q '^sigma-launch: launch 1 ' '$out'" || fail "not relaunched: $(tail -n 5 "$out")"
# the first step the relaunch printed: the recovery, to half a second
until_true 60 sh -c "sed -n '/^sigma-launch: launch 1 /,\$p' '$out' | grep -q '^step '" ||
	fail "the relaunch does not train: $(tail -n 5 "$out")"
log "recovery: $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s from the kill to the relaunch's first step"
grep -q "^sigma-launch: launch 1 .* on ${N[0]},${N[1]} " "$out" ||
	fail "relaunched elsewhere than the same nodes: $(grep '^sigma-launch' "$out")"
until_true 240 sh -c "grep -q 'rank 0 done: step 500' '$out'" ||
	fail "the relaunched job did not finish: $(jstate "$jid"): $(tail -n 5 "$out")"
r=$(sed -n 's/^sigmatorch: resumed after step \([0-9]*\)$/\1/p' "$out" | tail -n 1)
[ -n "$r" ] || fail "launch 1 did not resume from a snapshot: $(grep -E 'sigma-launch|resumed' "$out")"
[ "$r" -ge $((at - 1)) ] || fail "launch 1 resumed after step $r, the kill was at step $at"
until_true 30 sh -c "! squeue -h -j $jid | grep -q ." || fail "job $jid still in the queue"
[ "$(sacct -n -X -j "$jid" -o state | tr -d ' ')" = COMPLETED ] ||
	fail "job $jid ended $(sacct -n -X -j "$jid" -o state,exitcode)"
log "relaunched on the same nodes, resumed after step $r (killed at $at), completed"
