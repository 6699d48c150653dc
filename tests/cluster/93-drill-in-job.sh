#!/bin/bash
# In-job restart (--sigma-restart=in-job): the example job on 3 nodes, the
# last one an in-allocation spare, trains on 2 (dp 2, ZeRO-1, the node-local
# tier every step) through sigma-launch, and never goes back to the queue:
#  1. a rank killed on a healthy node: the step is relaunched on the same
#     nodes, resumed from tier 1;
#  2. a whole node crash (its slurmd, slurmstepd and rank killed at once):
#     the step goes on on the spare, the lost node's part coming from its
#     buddy's replica; sigmad, killed at the same time and started again
#     after the relaunch, drains the node once and does not requeue the job.
# The final weights and optimizer state are bitwise equal to an
# uninterrupted run's, and the job was never requeued (Restarts=0).
# The in-job run's srun words its messages as another Slurm release might:
# the launcher judges by the ranks' records and Slurm's state, never by
# srun's text (docs/job-protocol.md).
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
. "$SIGMA_SRCDIR/tests/cluster/sigmad-lib.sh"
. "$SIGMA_SRCDIR/tests/cluster/drill-lib.sh"

STEPS=400
DRILL_LAYOUT="--zero 1"
drill_setup drill-in-job
ref=$(drill_submit ref 3 "$STEPS" -N2) || exit 1
until_true 240 drill_ended "$ref" || fail "reference job $ref did not end: $(jstate "$ref")"
grep -q "^done: $STEPS steps" "$d/ref.out" || fail "reference run failed: $(tail -n 5 "$d/ref.out")"
log "reference done: $(grep '^done:' "$d/ref.out")"

# srun as another release might word it: the launcher finds this one first
wrap=$d/srun-reworded
mkdir -p "$wrap"
cat > "$wrap/srun" <<EOF
#!/bin/bash
exec $(command -v srun) "\$@" 2> >(sed -u -e 's/Exited with exit code/ended with status/' \\
	-e 's/: Killed/: killed by signal 9/' -e 's/Node failure on/lost contact with/' \\
	-e 's/_step_signal: Terminating/ending/' >&2)
EOF
chmod 755 "$wrap" "$wrap/srun"
jid=$(DRILL_ENV="PATH=$wrap:$PATH" drill_submit injob 3 "$STEPS" -N3 --no-kill --sigma-restart=in-job --sigma-job-spares=1) || exit 1
out=$d/injob.out
until_true 120 at_step "$out" 25 || fail "job $jid does not train: $(tail -n 5 "$out")"
mapfile -t N < <(job_nodes "$jid")
grep -q "^sigma-launch: launch 0 .* on ${N[0]},${N[1]} (in-allocation spares: ${N[2]})" "$out" ||
	fail "launch 0 not on the first two nodes: $(grep sigma-launch "$out")"

# 1. a software fault on a healthy node
pid=$(rank_pid "$jid" "${N[1]}") || fail "no rank of job $jid on ${N[1]}"
at=$(last_step "$out")
kill -KILL "$pid"
log "killed the rank on ${N[1]} at step $at"
until_true 60 sh -c "grep -q '^sigma-launch: launch 1 ' '$out'" || fail "not relaunched: $(tail -n 5 "$out")"
grep -q "^sigma-launch: launch 1 .* on ${N[0]},${N[1]} " "$out" ||
	fail "relaunched elsewhere than the same nodes: $(grep '^sigma-launch' "$out")"
grep -q "the rank on ${N[1]} died; ${N[1]} probes healthy" "$out" || fail "the launcher did not name the node: $(grep '^sigma-launch' "$out")"
until_true 60 sh -c "[ \"\$(grep -c 'continuing at step' '$out')\" -ge 1 ]" || fail "launch 1 did not resume"
r1=$(resumed_at "$out")
[ "$r1" -ge $((at - 2)) ] || fail "launch 1 resumed at step $r1, the kill was at $at: not from tier 1"
log "relaunched on the same nodes, resumed at step $r1"

# 2. a whole node crash
until_true 120 at_step "$out" $((r1 + 20)) || fail "no progress after the relaunch"
victim=${N[1]}
rank=$(rank_pid "$jid" "$victim") || fail "no rank of job $jid on $victim"
stepd=$(ps -o ppid= -p "$rank" | tr -d ' ')
at=$(last_step "$out")
# sigmad dies too, and comes back once the step was relaunched: it must
# neither requeue the job nor drain the node twice
kill -KILL "$(sigmad_pid)"
kill -KILL "$(cat "$SIGMA_TESTBED_DIR/run/slurmd-$victim.pid")" "$stepd" "$rank"
log "crashed $victim (slurmd, slurmstepd $stepd, rank $rank) at step $at, and killed sigmad"
until_true 90 sh -c "grep -q '^sigma-launch: launch 2 ' '$out'" || fail "not relaunched after the crash: $(tail -n 5 "$out")"
sigmad_start
grep -q "^sigma-launch: launch 2 .* on ${N[0]},${N[2]} " "$out" ||
	fail "not relaunched onto the spare ${N[2]}: $(grep '^sigma-launch' "$out")"
log "relaunched onto ${N[2]}: $(grep "^sigma-launch: ${victim} out" "$out")"

until_true 240 drill_ended "$jid" || fail "job $jid did not end: $(jstate "$jid")"
grep -q "^done: $STEPS steps" "$out" || fail "the in-job run failed: $(tail -n 5 "$out")"
[ "$(jfield "$jid" Restarts)" = 0 ] || fail "job $jid was requeued $(jfield "$jid" Restarts) times"
grep -q "SLURM_RESTART_COUNT\|^attempt [1-9] start" "$out" && fail "a second attempt of the batch script started"
until_true 30 sh -c "scontrol show node $victim | grep -q 'State=[A-Z+]*DRAIN'" || fail "$victim not drained: $(nstate "$victim")"
grep -q "job $jid: $victim failed .*: drained; the job restarts itself" "$SIGMAD_LOG" || fail "sigmad did not drain $victim for the job"
[ "$(events requeue "$jid")" = 0 ] || fail "sigmad requeued job $jid"
# the story: the AdminComment (sacct, once the job ended) and the history
until_true 30 sh -c "sacct -n -X -j $jid -o admincomment%400 | grep -q 'sigma: attempt 1: $victim .* -> relaunched in the allocation (in-job)'" ||
	fail "AdminComment lacks the relaunch: $(sacct -n -X -j "$jid" -o admincomment%400)"
[ "$(events in_job "$jid")" = 1 ] || fail "$(events in_job "$jid") in_job events for job $jid, want 1"
"$SIGMACTL" history --job "$jid" | grep -q "in_job *job $jid attempt 1 $victim" ||
	fail "history lacks the relaunch: $("$SIGMACTL" history --job "$jid")"
[ "$(grep -c "\"type\":\"drain\",\"job\":$jid,.*\"node\":\"$victim\"" "$SIGMAD_EVENTS")" = 1 ] ||
	fail "not one drain of $victim: $(grep "\"job\":$jid," "$SIGMAD_EVENTS")"

a=$(ckdir ref)/ckpt-$(printf %08d "$STEPS").h5
b=$(ls "$(ckdir injob)"/ckpt-"$(printf %08d "$STEPS")"*.h5 2>/dev/null | head -n 1)
[ -f "$a" ] && [ -f "$b" ] || fail "final checkpoints missing: $a ${b:-(none in $(ckdir injob))}"
for g in /model /optim/m /optim/v; do
	h5diff "$a" "$b" $g $g >/dev/null || fail "$g after $STEPS steps differs from the uninterrupted run"
done
log "final /model, /optim/m, /optim/v of $(basename "$b") bitwise equal to the uninterrupted run"
log "ok"
