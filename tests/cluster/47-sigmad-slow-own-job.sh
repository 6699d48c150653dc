#!/bin/bash
# A user's slow report moves the reporter's job alone. The test user's job
# and the victim's share a node (one core each). The test user reports it slow
# for their own job (sigmactl slow, as the tuner's --tuner-escalate does):
# their job checkpoints (SIGUSR1) and is requeued off the node; the victim's
# job is neither signalled nor requeued, and the node stays in service.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
. "$SIGMA_SRCDIR/tests/cluster/sigmad-lib.sh"
grep -q '^required' "$SIGMA_TESTBED_DIR/etc/plugstack.conf" 2>/dev/null || skip "the plugin is not loaded"

CTL=("$SIGMACTL" --config "$SIGMA_TESTBED_DIR/etc/sigma.conf")
OPTS=(-N1 -n1 -c1 --requeue --open-mode=append --sigma-spares=1
	--sigma-max-restarts=3 --sigma-probe=off --sigma-on-warning=checkpoint)
sigmad_fresh
d=$(workdir slow-attacker)
write_job "$d"
v=$(workdir slow-victim)
run_as_victim true
chown "$SIGMA_VICTIM_USER" "$v"
cp "$d/job.sh" "$v/job.sh"
chown "$SIGMA_VICTIM_USER" "$v/job.sh"

# the test user's job is not pinned (a requeue must be free to move it);
# the victim's joins it on its node
mine=$(cd "$d" && run_as_user sbatch --parsable "${OPTS[@]}" -o "$d/out" "$d/job.sh") ||
	fail "the test user's sbatch failed"
until_true 30 is_state "$mine" RUNNING || fail "job $mine not running: $(jstate "$mine")"
node=$(jfield "$mine" NodeList)
victim=$(cd "$v" && run_as_victim sbatch --parsable "${OPTS[@]}" -w "$node" -o "$v/out" "$v/job.sh") ||
	fail "the victim's sbatch failed"
until_true 30 is_state "$victim" RUNNING || fail "the victim's job $victim does not run on $node: $(jstate "$victim")"
until_true 10 sh -c "grep -q 'step 1 ' '$v/out' && grep -q 'step 1 ' '$d/out'" || fail "the jobs print no steps"
log "job $victim (victim) and job $mine (test user) both on $node"

r=$(run_as_user "${CTL[@]}" slow "$node" --job "$mine" 2>&1) || fail "slow refused: $r"
log "sigmactl slow $node --job $mine: $r"
# the reporter's own job moves
until_true 60 sh -c "grep -q USR1 '$d/out'" || fail "the reporter's job was not asked to checkpoint"
until_true 60 running_without "$mine" "$node" || fail "job $mine did not move off $node: $(jstate "$mine") on $(jfield "$mine" NodeList)"
log "job $mine moved to $(jfield "$mine" NodeList)"
# the victim's does not, and the node stays in service
sleep 10
grep -q USR1 "$v/out" && fail "the victim's job $victim was signalled: $(grep USR1 "$v/out")"
is_state "$victim" RUNNING && job_on "$victim" "$node" || fail "the victim's job $victim moved: $(jstate "$victim") on $(jfield "$victim" NodeList)"
[ "$(jfield "$victim" Restarts)" = 0 ] || fail "the victim's job was requeued"
jfield "$victim" AdminComment | grep -q "sigma: attempt" && fail "the victim's AdminComment tells a move: $(jfield "$victim" AdminComment)"
nstate "$node" | grep -q drain && fail "$node drained on a user's word: $(nreason "$node")"
[ "$(events slow "$mine")" = 1 ] || fail "no slow event for job $mine"
log "victim job $victim untouched on $node, $node in service"
scancel "$victim" "$mine"
log "ok"
