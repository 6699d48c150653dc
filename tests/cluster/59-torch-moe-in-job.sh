#!/bin/bash
# The PyTorch example under sigma-launch (contrib/examples/torch-moe/
# train.sbatch with --no-kill --sigma-restart=in-job, 2 ranks and an
# in-allocation spare), its snapshots node-local (/dev/shm/.../%N) and
# replicated to a buddy (--replica), through the faults a loop meets:
#   1. a NaN loss, then a loss spike three steps long: the guard skips the
#      NaN's update, and rolls back to the newest snapshot on the spike;
#   2. a rank killed on a healthy node: sigma-launch relaunches the step on
#      the same nodes, and it resumes from the node-local snapshot, at
#      most a step behind the kill;
#   3. a whole node crash (its slurmd, slurmstepd and rank killed at once,
#      its /dev/shm gone): the step is relaunched onto the in-allocation
#      spare, whose rank, with nothing of its own, resumes from its
#      buddy's replica; training ends.
# Each recovery's time, from the fault to the first new step, is logged.
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
local_root=/dev/shm/sigma-test-torch-moe
rm -rf "$local_root"
trap 'rm -rf "$local_root"' EXIT
out=$d/out
env="ALL,MOE_DATA=$d/corpus.txt,MOE_STEPS=500,MOE_CKPT_DIR=$local_root/%N,MOE_EXAMPLE_DIR=$EX"
env="$env,SIGMA_PYTHON=$PY,PYTHONPATH=$SIGMA_SRCDIR/python,PYTHONDONTWRITEBYTECODE=1,SIGMA_RUNTIME_LIB=$LIB"
env="$env,SIGMA_LAUNCHER=$LAUNCHER,SIGMA_PROBE=$PROBE,SIGMACTL=$SIGMACTL,SIGMA_CONF=$SIGMA_TESTBED_DIR/etc/sigma.conf"
env="$env,MOE_ARGS=--batch 4 --seq 16 --warmup 4 --log-every 1 --replica --inject-nan 40 --inject-spike 80"
jid=$(cd "$d" && run_as_user sbatch --parsable -N3 --no-kill --sigma-restart=in-job \
	--sigma-job-spares=1 --sigma-max-restarts=3 -o "$out" --export="$env" "$EX/train.sbatch") ||
	fail "sbatch failed"
at_step() { grep -q "^step $1 " "$out" 2>/dev/null; }
last_step() { sed -n 's/^step \([0-9]*\) .*/\1/p' "$out" | tail -n 1; }
resumed() { sed -n 's/^sigmatorch: resumed after step \([0-9]*\)$/\1/p' "$out" | tail -n 1; }
# rank_pid NODE: the job's rank there
rank_pid() {
	local p
	for p in $(pgrep -f "$EX/train_sigma.py"); do
		grep -qzx "SLURMD_NODENAME=$1" "/proc/$p/environ" 2>/dev/null || continue
		grep -qzx "SLURM_JOB_ID=$jid" "/proc/$p/environ" 2>/dev/null && { echo "$p"; return 0; }
	done
	return 1
}
# relaunched L: launch L trains; logs the time since t0
relaunched() {
	until_true 90 sh -c "grep -q '^sigma-launch: launch $1 ' '$out'" || fail "not relaunched: $(tail -n 5 "$out")"
	until_true 60 sh -c "sed -n '/^sigma-launch: launch $1 /,\$p' '$out' | grep -q '^step '" ||
		fail "launch $1 does not train: $(tail -n 5 "$out")"
	log "recovery: $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s from the fault to launch $1's first step"
}
until_true 180 at_step 120 || fail "job $jid does not train past step 120: $(jstate "$jid"): $(tail -n 5 "$out")"
mapfile -t N < <(job_nodes "$jid")
grep -q "^sigma-launch: launch 0 .* on ${N[0]},${N[1]} (in-allocation spares: ${N[2]})" "$out" ||
	fail "launch 0 not on the first two nodes: $(grep sigma-launch "$out")"
[ -d "$local_root/${N[1]}/rank-1" ] && [ -d "$local_root/${N[0]}/replica-of-rank-1" ] ||
	fail "no node-local snapshots or replica: $(ls -R "$local_root" | head -n 20)"

# 1. the guard
grep -q '^guard: step 40: non-finite value nan: skip$' "$out" ||
	fail "the NaN at step 40 was not skipped: $(grep '^guard' "$out")"
grep -q '^guard: step 8[0-2]: loss-spike .*rollback' "$out" ||
	fail "the spike at step 80 did not roll back: $(grep '^guard' "$out")"
log "guard: $(grep '^guard' "$out" | paste -sd';')"

# 2. a rank killed on a healthy node
pid=$(rank_pid "${N[1]}") || fail "no rank of job $jid on ${N[1]}"
at=$(last_step)
t0=$(date +%s.%N)
kill -KILL "$pid"
log "killed the rank on ${N[1]} (pid $pid) at step $at"
relaunched 1
grep -q "^sigma-launch: launch 1 .* on ${N[0]},${N[1]} " "$out" ||
	fail "relaunched elsewhere than the same nodes: $(grep '^sigma-launch' "$out")"
r=$(resumed)
[ -n "$r" ] && [ "$r" -ge $((at - 1)) ] || fail "launch 1 resumed after step ${r:-none}, the kill was at step $at"
log "relaunched on the same nodes, resumed after step $r (killed at $at)"

# 3. a whole node crash
until_true 120 at_step $((r + 40)) || fail "no progress after the relaunch: $(tail -n 5 "$out")"
victim=${N[1]}
rank=$(rank_pid "$victim") || fail "no rank of job $jid on $victim"
stepd=$(ps -o ppid= -p "$rank" | tr -d ' ')
at=$(last_step)
t0=$(date +%s.%N)
kill -KILL "$(cat "$SIGMA_TESTBED_DIR/run/slurmd-$victim.pid")" "$stepd" "$rank"
rm -rf "${local_root:?}/$victim" # the node's memory is gone with it
log "crashed $victim (slurmd, slurmstepd $stepd, rank $rank, its /dev/shm) at step $at"
relaunched 2
grep -q "^sigma-launch: launch 2 .* on ${N[0]},${N[2]} " "$out" ||
	fail "not relaunched onto the spare ${N[2]}: $(grep '^sigma-launch' "$out")"
until_true 240 sh -c "grep -q 'rank 0 done: step 500' '$out'" ||
	fail "the relaunched job did not finish: $(jstate "$jid"): $(tail -n 5 "$out")"
r=$(resumed)
[ -n "$r" ] && [ "$r" -ge $((at - 2)) ] ||
	fail "launch 2 resumed after step ${r:-none}, the crash was at step $at: not from the buddy's replica"
[ -d "$local_root/${N[2]}/rank-1" ] || fail "rank 1 did not go on on ${N[2]}"
log "rank 1 on ${N[2]} resumed after step $r from its buddy (crash at $at)"
# (sacct has a RESIZING record too: the crashed node left the job)
until_true 30 is_state "$jid" COMPLETED || fail "job $jid is $(jstate "$jid"), not COMPLETED"
log "completed"
