#!/bin/bash
# A user's scancel is final. The user cancels a sigma job during the grace
# sigmad gives it after its warning SIGUSR1 (the job notes the signal and
# keeps running, as a trainer that is slow to stop): sigmad must not requeue
# the cancelled job. It used to, a second later, and the job ran again.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
. "$SIGMA_SRCDIR/tests/cluster/sigmad-lib.sh"
grep -q '^HealthCheckProgram=' "$SLURM_CONF" || skip "no HealthCheckProgram in the testbed"
grace=$(sed -n 's/^sigmad_warn_grace=//p' "$SIGMA_TESTBED_DIR/etc/sigma.conf")

sigmad_fresh
d=$(workdir sigmad-cancel)
jid=$(submit_sigma "$d" IGNORE_USR1=1)
inj=$SIGMA_TESTBED_DIR/inject/n3
trap 'rm -f "$inj"' EXIT
printf 'ecc_corrected_rate=40\n' > "$inj"
chmod 644 "$inj"
until_true 60 sh -c "grep -q 'got USR1' '$d/out'" || fail "job $jid never got its warning signal: $(nreason n3)"
log "job $jid signalled: $(grep 'got USR1' "$d/out" | head -1)"
run_as_user scancel "$jid" || fail "the user cannot cancel job $jid"
log "cancelled by $SIGMA_TEST_USER during the ${grace}s grace"
# sigmad ends the recovery with the cancellation in its account (the old
# code never did, and requeued the job once the grace was over); a few
# polls more, and nothing may have requeued it
job_history() { "$SIGMACTL" --config "$SIGMA_TESTBED_DIR/etc/sigma.conf" history --job "$jid"; }
cancelled() { job_history | grep -q cancelled; }
until_true $((grace + 8)) cancelled || fail "history does not say the job was cancelled: $(job_history)"
sleep 3
st=$(jstate "$jid")
[ "$st" = CANCELLED ] || fail "job $jid is $st after its user cancelled it (restarts $(jfield "$jid" Restarts))"
[ "$(jfield "$jid" Restarts)" = 0 ] || fail "job $jid was requeued $(jfield "$jid" Restarts) time(s)"
h=$(job_history)
echo "$h"
echo "$h" | grep -q "started again" && fail "history says the cancelled job started again"
resv_has n5 && resv_has n6 || fail "the spares did not go back to the pool: $(resv_nodes)"
log "job $jid stays CANCELLED; spares $(resv_nodes)"
