#!/bin/bash
# No spare left: both spares drained by an admin, a node of a running sigma
# job fails. sigmad still requeues the job (with the bad node excluded) and
# says so: AdminComment "-> requeued (no spare)", history "not enough spares
# in the pool"; the job then waits, PENDING, for nodes like any other job.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
. "$SIGMA_SRCDIR/tests/cluster/sigmad-lib.sh"

sigmad_fresh
for n in n5 n6; do
	"$SIGMACTL" drain "$n" --reason "kept out by the no-spare drill" >/dev/null || fail "sigmactl drain $n failed"
done
pool_empty() { ! resv_has n5 && ! resv_has n6; }
until_true 20 pool_empty || fail "the spares stayed in the pool: $(resv_nodes)"
d=$(workdir drill-no-spare)
jid=$(submit_sigma "$d")
log "job $jid on $(jfield "$jid" NodeList); spares: $("$SIGMACTL" spares | tr '\n' ' ')"
if [ -x "$PROBE" ] && grep -q '^HealthCheckProgram' "$SLURM_CONF"; then
	echo "compute=fail" > "$SIGMA_TESTBED_DIR/inject/n2"
else
	scontrol update nodename=n2 state=drain reason='sigma: probe quick: host compute=fail'
fi
until_true 40 sh -c "scontrol show job $jid | grep -q 'requeued (no spare)'" ||
	fail "AdminComment does not say the job was requeued without a spare: $(scontrol show job "$jid" | grep AdminComment); $(tail -n 3 "$SIGMAD_LOG")"
until_true 20 is_state "$jid" PENDING || fail "job $jid is $(jstate "$jid"), want PENDING"
sleep 5
is_state "$jid" PENDING || fail "job $jid left PENDING without nodes: $(jstate "$jid") on $(jfield "$jid" NodeList)"
scontrol show job "$jid" | grep -E 'JobState|ExcNodeList|AdminComment'
scontrol show job "$jid" | grep -q 'ExcNodeList=n2' || fail "n2 not excluded"
h=$("$SIGMACTL" history --job "$jid")
echo "$h"
echo "$h" | grep -q "decide *job $jid" || fail "history lacks the decision"
grep -q "job $jid attempt 2: failure on n2 .*(requeued, not enough spares in the pool)" "$SIGMAD_LOG" ||
	fail "sigmad's log does not say why: $(grep "job $jid" "$SIGMAD_LOG" | tail -n 3)"
log "ok: job $jid waits for nodes: $(squeue -h -j "$jid" -o '%T %r')"
