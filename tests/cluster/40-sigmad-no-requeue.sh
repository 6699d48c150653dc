#!/bin/bash
# Jobs Slurm cannot requeue are not "requeued": a --no-requeue sigma job
# whose node fails. sigmad used to take a spare, log "slurm_requeue:
# Requested operation is presently disabled" twenty times over 100 s and
# give up with no account while the job ran on. Now the prolog already says
# in the AdminComment that sigma cannot protect the job, and on the failure
# sigmad drains the node, keeps its spares, and says so in the AdminComment
# and the history.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
. "$SIGMA_SRCDIR/tests/cluster/sigmad-lib.sh"

sigmad_fresh
d=$(workdir sigmad-norequeue)
jid=$(cd "$d" && run_as_user sbatch --parsable -J noreq -N1 --exclusive --no-requeue \
	--sigma-spares=1 --sigma-max-restarts=3 --sigma-probe=off -o "$d/out" --wrap 'sleep 600') ||
	fail "sbatch failed"
until_true 30 is_state "$jid" RUNNING || fail "job $jid not running"
node=$(jfield "$jid" NodeList)
until_true 10 sh -c "scontrol show job $jid | grep -q 'AdminComment=.*cannot protect: the job cannot be requeued'" ||
	fail "the prolog did not say sigma cannot protect job $jid: $(jfield "$jid" AdminComment)"
log "job $jid on $node: $(jfield "$jid" AdminComment)"
errors() { grep -c "slurm_requeue.*job $jid\|requeue $jid" "$SIGMAD_LOG" 2>/dev/null || true; }
before=$(errors)
scontrol update nodename="$node" state=drain reason='sigma: probe quick: host compute=fail'
until_true 20 sh -c "scontrol show job $jid | grep -q 'AdminComment=.*sigma cannot protect this job'" ||
	fail "no account in the AdminComment: $(jfield "$jid" AdminComment)"
log "AdminComment: $(jfield "$jid" AdminComment)"
sleep 3
resv_has n5 && resv_has n6 || fail "a spare was taken for a job that cannot be requeued: pool $(resv_nodes)"
[ "$(errors)" = "$before" ] || fail "sigmad tried to requeue job $jid: $(grep "$jid" "$SIGMAD_LOG" | tail -3)"
"$SIGMACTL" --config "$SIGMA_TESTBED_DIR/etc/sigma.conf" history --job "$jid" | grep -q 'give_up.*cannot protect' ||
	fail "history: $("$SIGMACTL" --config "$SIGMA_TESTBED_DIR/etc/sigma.conf" history --job "$jid")"
scancel "$jid"
