#!/bin/bash
# --sigma-max-restarts=1 and two failures: the first (a rank killed on a
# node that fails its probe) is recovered onto a spare; the second ends the
# job FAILED after that one requeue, and sacct's AdminComment and sigmactl
# history say why (max_restarts=1 reached).
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
. "$SIGMA_SRCDIR/tests/cluster/sigmad-lib.sh"
. "$SIGMA_SRCDIR/tests/cluster/drill-lib.sh"

drill_setup drill-max-restarts
jid=$(drill_submit limit 1 2000) || exit 1
out=$d/limit.out

# fail_rank ATTEMPT I: once that attempt trains, inject a probe failure on
# the job's I-th node and kill the job's rank there; prints the node
fail_rank() {
	local pid node
	until_true 120 at_step "$out" 15 "$1" || fail "attempt $1 does not train: $(tail -n 5 "$out")"
	node=$(job_nodes "$jid" | sed -n "$2p")
	pid=$(rank_pid "$jid" "$node") || fail "no rank of job $jid on '$node'"
	drill_inject "$node" compute=fail
	kill -KILL "$pid"
	log "attempt $1: killed the rank on $node at step $(last_step "$out"), injected compute=fail" >&2
	echo "$node"
}

first=$(fail_rank 0 2) || exit 1
until_true 120 started "$out" 1 || fail "not requeued after the first failure: $(jstate "$jid"); $(tail -n 3 "$SIGMAD_LOG")"
job_on "$jid" "$first" && fail "attempt 1 still on $first"
log "attempt 1 on $(jfield "$jid" NodeList)"

second=$(fail_rank 1 3) || exit 1
until_true 60 drill_ended "$jid" || fail "job $jid did not end: $(jstate "$jid")"
# slurmctld refuses to change a finished job: sigmad then writes the
# accounting record, so sacct is where the story is
acct_comment() { sacct -n -X -j "$jid" -o admincomment%600 | sed 's/ *$//' | tail -n 1; }
until_true 60 sh -c "sacct -n -X -j $jid -o admincomment%600 | grep -q 'not requeued: max_restarts=1 reached'" ||
	fail "AdminComment does not say why: $(acct_comment)"
sleep 5 # a requeue, if sigmad wrongly made one, would show by now
st=$(jstate "$jid")
[ "$st" = FAILED ] || fail "job $jid is $st, want FAILED"
[ "$(jfield "$jid" Restarts)" = 1 ] || fail "job restarted $(jfield "$jid" Restarts) times, want 1"
started "$out" 2 && fail "a third attempt started"
ac=$(acct_comment)
echo "$ac" | grep -q "sigma: attempt 2: $first .*compute=fail.* -> requeued onto n[56]" || fail "AdminComment lacks the recovery: $ac"
echo "$ac" | grep -q "sigma: attempt 2: $second .*compute=fail.* -> not requeued: max_restarts=1 reached" || fail "AdminComment lacks the give-up: $ac"
until_true 30 sh -c "sacct -n -D -X -j $jid -o state | grep -q FAILED" || fail "sacct: $(sacct -n -D -X -j "$jid" -o jobid,state)"
sacct -D -X -j "$jid" -o jobid,state,exitcode,nodelist,admincomment%150
h=$("$SIGMACTL" history --job "$jid")
echo "$h"
echo "$h" | grep -q "give_up *job $jid" || fail "history lacks the give-up"
[ "$(events requeue "$jid")" = 1 ] || fail "$(events requeue "$jid") requeue events, want 1"
log "ok"
