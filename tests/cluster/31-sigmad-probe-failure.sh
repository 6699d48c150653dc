#!/bin/bash
# A 4-node sigma job loses n3 to a probe failure: sigmad releases a spare,
# requeues the job with n3 excluded and its begin time reset, and the job
# runs again on a spare within 30 s of Slurm draining n3. AdminComment,
# sinfo -R and sigmactl history tell the story.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
. "$SIGMA_SRCDIR/tests/cluster/sigmad-lib.sh"

sigmad_fresh
d=$(workdir sigmad-fail)
jid=$(submit_sigma "$d")
log "job $jid on $(jfield "$jid" NodeList)"
job_on "$jid" n3 || fail "job $jid is not on n3"

if [ -x "$PROBE" ] && grep -q '^HealthCheckProgram' "$SLURM_CONF"; then
	# the probe, as health check, finds the injected fault and drains n3
	echo "ecc_uncorrected=2" > "$SIGMA_TESTBED_DIR/inject/n3"
else
	scontrol update nodename=n3 state=drain reason='sigma: probe quick: gpu0 ecc_uncorrected=2'
fi
until_true 40 sh -c 'scontrol show node n3 | grep -q "Reason=sigma: probe"' ||
	fail "n3 not drained by the probe: $(nreason n3)"
t0=$(date +%s)
log "n3 drained: $(nreason n3)"
until_true 30 running_without "$jid" n3 || fail "job $jid not running without n3 30 s later: $(jstate "$jid") $(jfield "$jid" NodeList)"
secs=$(( $(date +%s) - t0 ))
log "job $jid running again on $(jfield "$jid" NodeList) ${secs}s after the drain"
nodes=$(job_nodes "$jid" | tr '\n' ' ')
case "$nodes" in *n5*|*n6*) ;; *) fail "not on a spare: $nodes" ;; esac
[ "$(jfield "$jid" ExcNodeList)" = n3 ] || fail "exc_nodes: $(jfield "$jid" ExcNodeList)"
rm -f "$SIGMA_TESTBED_DIR/inject/n3"

ac=$(scontrol show job "$jid" | sed -n "s/^ *AdminComment=//p")
log "AdminComment: $ac"
echo "$ac" | grep -q '^sigma\[.*\] *sigma: attempt 2: n3 .*-> requeued onto n[56]' ||
	fail "AdminComment does not tell the story: $ac"
sinfo -R -h -N -o '%N %E' | grep -q '^n3 sigma: probe' || fail "sinfo -R: $(sinfo -R)"
h=$("$SIGMACTL" history --job "$jid")
echo "$h"
for t in decide release requeue complete; do
	echo "$h" | grep -q "^.* $t *job $jid attempt 2" || fail "history lacks $t"
done
# the user sees their own job's history
run_as_user "$SIGMACTL" --config "$SIGMA_TESTBED_DIR/etc/sigma.conf" history --job "$jid" |
	grep -q "complete.*job $jid attempt 2" || fail "the owner cannot see the history"
grep -q "attempt 1 step" "$d/out" || fail "no steps of attempt 1: $(tail -3 "$d/out")"
# sacct, where users look: a row per attempt, the account on the second
scancel "$jid"
until_true 30 sh -c "sacct -n -D -X -j $jid -o admincomment%400 | grep -q 'sigma: attempt 2: n3 .*-> requeued onto n[56]'" ||
	fail "sacct -o admincomment does not tell the story: $(sacct -n -D -X -j "$jid" -o jobid,state,admincomment%200)"
sacct -n -D -X -j "$jid" -o jobid,state,nodelist,admincomment%200
log "ok"
