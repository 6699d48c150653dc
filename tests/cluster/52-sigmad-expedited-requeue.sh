#!/bin/bash
# Expedited requeue (Slurm 25.11 and later, SlurmctldParameters=
# enable_expedited_requeue, which the testbed sets there): a sigma job
# submitted with --requeue=expedite loses a node (its slurmd killed).
# Once sigmad sets the node down, Slurm requeues the job itself and starts
# it again at once, on the spare sigmad released with its decision: sigmad
# does not requeue it or hold it back with a begin time (sbatch's
# --requeue=expedite is in the job's flags), logs no error, and writes the
# same account as for any requeue.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
. "$SIGMA_SRCDIR/tests/cluster/sigmad-lib.sh"
grep -q '^SlurmctldParameters=.*enable_expedited_requeue' "$SLURM_CONF" ||
	skip "no expedited requeue: Slurm $(slurmctld -V | cut -d' ' -f2) is older than 25.11"

sigmad_fresh
d=$(workdir sigmad-expedite)
jid=$(SUBMIT_REQUEUE=--requeue=expedite submit_sigma "$d")
scontrol show job "$jid" | grep -q 'ExpeditedRequeue=Yes' ||
	fail "job $jid does not ask for expedited requeue: $(scontrol show job "$jid" | grep -i requeue)"
log "job $jid on $(jfield "$jid" NodeList), expedited requeue"
pid=$(cat "$SIGMA_TESTBED_DIR/run/slurmd-n2.pid")
kill -9 "$pid"
log "slurmd n2 (pid $pid) killed"
until_true 60 moved_to_spare "$jid" n2 ||
	fail "job $jid not running again on a spare without n2: $(jstate "$jid") $(jfield "$jid" NodeList)"
log "job $jid running on $(jfield "$jid" NodeList)"
until_true 10 sh -c "grep -q '^attempt 1 step' '$d/out'" || fail "attempt 1 prints no steps"
until_true 10 sh -c "scontrol show job $jid | grep -q 'sigma: attempt 2: n2 not responding -> requeued onto n[56]'" ||
	fail "AdminComment: $(jfield "$jid" AdminComment)"
# Slurm's own requeue, found running again or pending a moment (the
# epilog on its nodes), when sigmad only excludes the node
grep -Eq "\"type\":\"requeue\",\"job\":$jid,.*\"text\":\"(found the job started again|exc_nodes=n2 \(expedited: no begin time\))\"" "$SIGMAD_EVENTS" ||
	fail "sigmad did not find Slurm's own requeue: $(grep "\"job\":$jid," "$SIGMAD_EVENTS" | grep requeue)"
! grep -q "\"type\":\"requeue\",\"job\":$jid,.*begin_time" "$SIGMAD_EVENTS" ||
	fail "sigmad held the expedited job back: $(grep "\"job\":$jid,.*begin_time" "$SIGMAD_EVENTS")"
no_sigmad_errors "$jid"
[ "$(jfield "$jid" Restarts)" = 1 ] || fail "restarts: $(jfield "$jid" Restarts)"
log "ok: Slurm requeued and restarted it; sigmad's account: $(scontrol show job "$jid" | sed -n 's/.*AdminComment=.* sigma: attempt/attempt/p')"
