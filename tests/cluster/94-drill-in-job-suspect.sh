#!/bin/bash
# In-job restart, the two ends of it: a rank that keeps dying on the same
# healthy node (three times) makes that node a suspect, which the step
# leaves for the in-allocation spare and sigmad, once its own probe finds
# no fault and Slurm records the three failed steps, drains with a reason
# that says so; sigmad counts the three relaunches against the job's restarts;
# then a node that fails its probe, with no in-allocation spare
# left, sends the job back to today's path: it exits 76, and sigmad
# requeues it onto the pool's spares, where it resumes and completes.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
. "$SIGMA_SRCDIR/tests/cluster/sigmad-lib.sh"
. "$SIGMA_SRCDIR/tests/cluster/drill-lib.sh"

STEPS=600
DRILL_LAYOUT="--zero 1"
drill_setup drill-in-job-suspect
jid=$(drill_submit suspect 6 "$STEPS" -N3 --no-kill --sigma-restart=in-job --sigma-job-spares=1) || exit 1
out=$d/suspect.out
until_true 120 at_step "$out" 10 || fail "job $jid does not train: $(tail -n 5 "$out")"
mapfile -t N < <(job_nodes "$jid")

# kill_on NODE LAUNCH: once launch LAUNCH has trained a few steps, kill
# the job's rank on NODE
kill_on() {
	local pid
	until_true 60 sh -c "grep -q '^sigma-launch: launch $2 ' '$out'" || fail "no launch $2: $(tail -n 5 "$out")"
	until_true 60 sh -c "[ \"\$(sed -n '/^sigma-launch: launch $2 /,\$p' '$out' | grep -c '^step ')\" -ge 5 ]" ||
		fail "launch $2 does not train: $(tail -n 5 "$out")"
	pid=$(rank_pid "$jid" "$1") || fail "no rank of job $jid on $1"
	kill -KILL "$pid"
	log "launch $2: killed the rank on $1 at step $(last_step "$out")"
}
for k in 0 1 2; do kill_on "${N[1]}" "$k"; done
until_true 60 sh -c "grep -q '^sigma-launch: launch 3 ' '$out'" || fail "no launch 3: $(tail -n 5 "$out")"
grep -q "^sigma-launch: launch 1 .* on ${N[0]},${N[1]} " "$out" || fail "launch 1 not on the same nodes"
grep -q "^sigma-launch: launch 3 .* on ${N[0]},${N[2]} " "$out" ||
	fail "launch 3 did not leave the suspect ${N[1]}: $(grep '^sigma-launch' "$out")"
# sigmad probes it first (healthy), then drains it on Slurm's count
until_true 60 sh -c "scontrol show node ${N[1]} | grep -q 'State=[A-Z+]*DRAIN'" || fail "${N[1]} not drained: $(nstate "${N[1]}")"
nreason "${N[1]}" | grep -q "sigma: suspect: the rank of job $jid keeps dying here" ||
	fail "${N[1]}'s reason: $(nreason "${N[1]}")"
log "${N[1]} drained: $(nreason "${N[1]}")"
[ "$(jfield "$jid" Restarts)" = 0 ] || fail "job $jid was requeued"
# the three relaunches count against --sigma-max-restarts=6 in sigmad too
[ "$(events relaunch "$jid")" = 3 ] || fail "$(events relaunch "$jid") relaunch events, want 3"
left=$("$SIGMACTL" --config "$SIGMA_TESTBED_DIR/etc/sigma.conf" --json status |
	python3 -c "import json, sys; print([j['restarts_left'] for j in json.load(sys.stdin)['jobs'] if j['job'] == $jid][0])") ||
	fail "no job $jid in sigmactl status"
[ "$left" = 3 ] || fail "sigmactl status: job $jid has $left restarts left, want 3"
# nor may a user count relaunches for a job not theirs
run_as_user "$SIGMACTL" --config "$SIGMA_TESTBED_DIR/etc/sigma.conf" relaunch --job 999999 --launch 1 2>&1 |
	grep -q "no such job of yours" || fail "a relaunch for a job not the user's was not refused"

# someone else's job cannot have a node drained as a suspect
"$SIGMACTL" --config "$SIGMA_TESTBED_DIR/etc/sigma.conf" status >/dev/null || fail "sigmactl status"
r=$(run_as_user "$SIGMACTL" --config "$SIGMA_TESTBED_DIR/etc/sigma.conf" suspect "${N[0]}" --job 999999 2>&1) &&
	fail "a suspect report for a job that is not the user's was taken: $r"
echo "$r" | grep -q "no such job of yours" || fail "refusal does not say why: $r"
nstate "${N[0]}" | grep -q drain && fail "${N[0]} drained on a refused report"

# no in-allocation spare left: a failing node sends the job to the queue
until_true 60 sh -c "[ \"\$(sed -n '/^sigma-launch: launch 3 /,\$p' '$out' | grep -c '^step ')\" -ge 5 ]" ||
	fail "launch 3 does not train: $(tail -n 5 "$out")"
drill_inject "${N[2]}" compute=fail
pid=$(rank_pid "$jid" "${N[2]}") || fail "no rank on ${N[2]}"
kill -KILL "$pid"
log "launch 3: killed the rank on ${N[2]}, which fails its probe"
until_true 60 sh -c "grep -q 'no in-allocation spare left for ${N[2]}' '$out'" || fail "the launcher did not fall back: $(tail -n 5 "$out")"
until_true 120 started "$out" 1 || fail "not requeued by sigmad: $(jstate "$jid"); $(tail -n 3 "$SIGMAD_LOG")"
job_on "$jid" "${N[2]}" && fail "attempt 1 still on ${N[2]}"
log "requeued by sigmad onto $(jfield "$jid" NodeList)"
until_true 300 drill_ended "$jid" || fail "job $jid did not end: $(jstate "$jid")"
grep -q "^done: $STEPS steps" "$out" || fail "the run failed: $(tail -n 5 "$out")"
[ "$(events requeue "$jid")" = 1 ] || fail "$(events requeue "$jid") requeues, want 1"
log "ok"
