#!/bin/bash
# An early warning (an injected corrected-error rate above its limit) on a
# node that runs a job: the health check drains it with "sigma: warning:
# probe quick: ...", the node is DRAINING while the job keeps running, and
# the job completes normally. (Not a sigma job, so that the controller,
# which moves sigma jobs off warned nodes, leaves it alone.)
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
grep -q 'sigma.so' "$SIGMA_TESTBED_DIR/etc/plugstack.conf" || skip "sigma.so not loaded"
grep -q '^HealthCheckProgram=' "$SLURM_CONF" || skip "no HealthCheckProgram in the testbed"
interval=$(sed -n 's/^HealthCheckInterval=//p' "$SLURM_CONF")

inj=$SIGMA_TESTBED_DIR/inject/n3
trap 'rm -f "$inj"' EXIT
d=$(workdir warning)
jid=$(cd "$d" && run_as_user sbatch --parsable -w n3 -o "$d/out-%j" \
	--wrap "touch $d/started; while [ ! -e $d/go ]; do sleep 0.2; done; echo done") || fail "sbatch failed"
until_true 30 is_state "$jid" RUNNING || fail "job $jid is $(jstate "$jid"), not RUNNING"
# RUNNING comes before the prolog ends (PrologFlags=Alloc): wait for the
# script itself, so that the injection below cannot reach the prolog probe
until_true 30 test -e "$d/started" || fail "job $jid is $(jstate "$jid") and its script never started"
printf 'ecc_corrected_rate=40\n' > "$inj"
chmod 644 "$inj"
reason="sigma: warning: probe quick: host ecc_corrected_rate=40/h (limit 20)"
until_true $((interval * 3 + 10)) sh -c "scontrol show node n3 | grep -qF 'Reason=$reason'" ||
	fail "n3 not drained with the warning: $(nreason n3)"
[ "$(nstate n3)" = drng ] || fail "n3 is $(nstate n3), not draining, while its job runs"
is_state "$jid" RUNNING || fail "the warning stopped job $jid: $(jstate "$jid")"
log "n3 $(nstate n3) with '$(nreason n3)', job $jid still RUNNING"
touch "$d/go"
until_true 30 is_state "$jid" COMPLETED || fail "job $jid is $(jstate "$jid")"
until_true 10 sh -c '[ "$(sinfo -h -n n3 -o %t)" = drain ]' || fail "n3 is $(nstate n3) after the job"
log "job $jid COMPLETED; n3 $(nstate n3)"
