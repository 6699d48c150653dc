#!/bin/bash
# The recovery drill: contrib/examples/train-moe.sbatch on 4 nodes (pp 2 x
# dp 2 x ep 2, the model in parts, the node-local tier every step) is moved
# off a node that warns (SIGUSR1, checkpoint, exit 75, requeued onto a
# spare), then loses a rank (SIGKILL) on a node that fails its probe (exit
# 76, requeued onto the other spare, resumed from tier 1: the step before
# the kill, at most two back when the kill lands during a write). Its final weights and optimizer state are bitwise equal to an
# uninterrupted run of the same layout and steps, and sacct, AdminComment
# and sigmactl history tell both recoveries.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
. "$SIGMA_SRCDIR/tests/cluster/sigmad-lib.sh"
. "$SIGMA_SRCDIR/tests/cluster/drill-lib.sh"

STEPS=180
drill_setup drill-bitwise
log "reference: $STEPS steps uninterrupted"
ref=$(drill_submit ref 3 "$STEPS") || exit 1
until_true 240 drill_ended "$ref" || fail "reference job $ref did not end: $(jstate "$ref")"
grep -q "^done: $STEPS steps" "$d/ref.out" || fail "reference run failed: $(tail -n 5 "$d/ref.out")"
log "reference done: $(grep '^done:' "$d/ref.out")"

jid=$(drill_submit drill 3 "$STEPS") || exit 1
out=$d/drill.out
until_true 120 at_step "$out" 30 0 || fail "job $jid does not train: $(tail -n 5 "$out")"
warn_node=$(job_nodes "$jid" | sed -n 3p)
drill_inject "$warn_node" ecc_corrected_rate=40
log "warning injected on $warn_node at step $(last_step "$out")"
until_true 90 started "$out" 1 || fail "job not moved: $(tail -n 5 "$out")"
until_true 90 at_step "$out" 1 1 || fail "attempt 1 does not train: $(tail -n 5 "$out")"
grep -q '^stopped by .* after a checkpoint: exit 75' "$out" || fail "attempt 0 did not checkpoint on SIGUSR1"
s0=$(sed -n 's/^stopped by .* at step \([0-9]*\) after.*/\1/p' "$out")
r1=$(resumed_at "$out")
[ "$s0" = "$r1" ] || fail "the warning move lost steps: stopped at $s0, resumed at $r1"
job_on "$jid" "$warn_node" && fail "still on $warn_node"
log "moved to $(jfield "$jid" NodeList), resumed at step $r1 (stopped at $s0)"

until_true 120 at_step "$out" $((r1 + 30)) 1 || fail "no progress after the move"
fail_node=$(job_nodes "$jid" | grep -vx "$warn_node" | sed -n 2p)
pid=$(rank_pid "$jid" "$fail_node") || fail "no rank of job $jid on $fail_node"
drill_inject "$fail_node" compute=fail ecc_uncorrected=2
kill -KILL "$pid"
killed_at=$(last_step "$out")
log "killed the rank on $fail_node at step $killed_at, injected a probe failure"
until_true 120 started "$out" 2 || fail "job not requeued after the rank kill: $(jstate "$jid"); $(tail -n 3 "$SIGMAD_LOG")"
until_true 90 at_step "$out" 1 2 || fail "attempt 2 does not train: $(tail -n 5 "$out")"
r2=$(resumed_at "$out")
[ $((killed_at - r2)) -le 2 ] || fail "resumed at $r2, $((killed_at - r2)) steps before the kill at $killed_at: $(grep '^resume:' "$out" | tail -1)"
grep '^resume:' "$out" | tail -1 | grep -q '^resume: tier 1, step' ||
	fail "the requeue did not resume from tier 1: $(grep '^resume:' "$out" | tail -1)"
job_on "$jid" "$fail_node" && fail "still on $fail_node"
log "requeued onto $(jfield "$jid" NodeList), resumed at step $r2 ($((killed_at - r2)) steps lost)"
until_true 240 drill_ended "$jid" || fail "job $jid did not end: $(jstate "$jid")"
grep -q "^done: $STEPS steps" "$out" || fail "the drill run failed: $(tail -n 5 "$out")"

a=$(ckdir ref)/ckpt-$(printf %08d "$STEPS").h5
# written by the third attempt (SIGMA_ATTEMPT 2): its name carries it
b=$(ckdir drill)/ckpt-$(printf %08d "$STEPS")-a2.h5
[ -f "$a" ] && [ -f "$b" ] || fail "final checkpoints missing: $a $b"
for g in /model /optim/m /optim/v; do
	h5diff "$a" "$b" $g $g >/dev/null || fail "$g after $STEPS steps differs from the uninterrupted run"
done
log "final /model, /optim/m, /optim/v bitwise equal to the uninterrupted run"

until_true 30 sh -c "[ \$(sacct -n -D -X -j $jid -o jobid | wc -l) -ge 3 ]" || fail "sacct: $(sacct -n -D -X -j "$jid" -o jobid,state)"
sacct -D -X -j "$jid" -o jobid,state,nodelist,admincomment%150
ac=$(jfield_all "$jid" AdminComment)
echo "$ac" | grep -q "sigma: attempt 2: $warn_node warning .* -> checkpointed, requeued onto n[56]" || fail "AdminComment lacks the move: $ac"
echo "$ac" | grep -q "sigma: attempt 3: $fail_node .*compute=fail.* -> requeued onto n[56]" || fail "AdminComment lacks the requeue: $ac"
h=$("$SIGMACTL" history --job "$jid")
echo "$h"
echo "$h" | grep -q "signal *job $jid attempt 2" || fail "history lacks the signal"
echo "$h" | grep -q "complete *job $jid attempt 3" || fail "history lacks the second recovery"
log "ok"
