#!/bin/bash
# The auto-tuner's last rung (docs/tuner.md): rank 3 made 3x slower stays
# slow after its shares moved; past --tuner-escalate it reports its own
# node (sigmactl slow), sigmad takes it as an early warning for this job
# alone (the node stays in service), and the warning path moves the job
# onto a spare
# (SIGUSR1, checkpoint, exit 75, requeue): it resumes at the step it
# stopped at, no step lost. A user cannot report a node of a job not theirs.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
. "$SIGMA_SRCDIR/tests/cluster/sigmad-lib.sh"
. "$SIGMA_SRCDIR/tests/cluster/drill-lib.sh"

STEPS=4000
drill_setup drill-tuner-escalate
inject=$d/tuner-inject
echo "slow:3:3" > "$inject"
chmod 644 "$inject"
DRILL_LAYOUT="--tuner on --tuner-escalate 5"
DRILL_ENV="SIGMA_TUNER_INJECT_FILE=$inject"
jid=$(drill_submit tuner 3 "$STEPS") || exit 1
out=$d/tuner.out
until_true 120 sh -c "grep -q '^tuner: step [0-9]*: shares' '$out'" ||
	fail "the shares did not move: $(grep '^tuner\|^step' "$out" | tail -n 5)"
log "$(grep -m1 '^tuner: step [0-9]*: shares' "$out")"
# rank 3's node, read now: the report may move the job before it is
# read again
rank3=$(job_nodes "$jid" | sed -n 4p)
until_true 60 sh -c "grep -q 'as an early warning (sigmactl slow)' '$out'" ||
	fail "rank 3 did not report its node: $(grep '^tuner' "$out" | tail -n 5)"
line=$(grep -m1 'as an early warning (sigmactl slow)' "$out")
node=$(sed 's/.* reporting \([^ ]*\) as an early warning.*/\1/' <<<"$line")
log "$line"
[ -n "$rank3" ] && [ "$node" = "$rank3" ] || fail "$node is not rank 3's node (${rank3:-none})"
until_true 20 sh -c "[ \"\$(grep -c '\"type\":\"slow\",\"job\":$jid,' '$SIGMAD_EVENTS')\" = 1 ]" ||
	fail "sigmad did not take the report: $(tail -n 3 "$SIGMAD_LOG")"
log "sigmad: $(grep "job $jid: $node slow" "$SIGMAD_LOG" | tail -n 1)"

until_true 90 started "$out" 1 || fail "job not moved: $(tail -n 5 "$out"); $(tail -n 3 "$SIGMAD_LOG")"
rm -f "$inject" # the new node is healthy
until_true 90 at_step "$out" 1 1 || fail "attempt 1 does not train: $(tail -n 5 "$out")"
job_on "$jid" "$node" && fail "still on $node"
nstate "$node" | grep -q drain && fail "$node drained on the job's own word: $(nreason "$node")"
grep -q '^stopped by .* after a checkpoint: exit 75' "$out" || fail "attempt 0 did not checkpoint on SIGUSR1"
s0=$(sed -n 's/^stopped by .* at step \([0-9]*\) after.*/\1/p' "$out")
r1=$(resumed_at "$out")
[ "$s0" = "$r1" ] || fail "the move lost steps: stopped at $s0, resumed at $r1"
ac=$(jfield_all "$jid" AdminComment)
echo "$ac" | grep -q "$node warning .* -> checkpointed, requeued onto" || fail "AdminComment: $ac"
log "moved to $(jfield "$jid" NodeList), resumed at step $r1 (stopped at $s0)"

# a node of a job that is not the user's cannot be reported
r=$(run_as_user "$SIGMACTL" --config "$SIGMA_TESTBED_DIR/etc/sigma.conf" slow n1 --job 999999 2>&1) &&
	fail "a slow report for a job not the user's was taken: $r"
echo "$r" | grep -q "no such job of yours" || fail "the refusal does not say why: $r"
scancel "$jid"
until_true 60 drill_ended "$jid" || fail "job $jid did not end"
log "ok"
