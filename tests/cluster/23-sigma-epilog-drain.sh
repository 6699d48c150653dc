#!/bin/bash
# A node that got worse while the job ran: the epilog's full probe finds the
# (injected) failure on n3 and drains it with a sigma: reason; the job
# itself stays COMPLETED.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
grep -q 'sigma.so' "$SIGMA_TESTBED_DIR/etc/plugstack.conf" || skip "sigma.so not loaded"

inj=$SIGMA_TESTBED_DIR/inject/n3
trap 'rm -f "$inj"' EXIT
d=$(workdir epilogdrain)
jid=$(cd "$d" && run_as_user sbatch --parsable -w n3 --sigma-probe=full -o "$d/out-%j" \
	--wrap "touch $d/started; while [ ! -e $d/go ]; do sleep 0.2; done; echo done") || fail "sbatch failed"
until_true 30 is_state "$jid" RUNNING || fail "job $jid is $(jstate "$jid"), not RUNNING"
# RUNNING comes before the prolog ends (PrologFlags=Alloc): wait for the
# script itself, so that the injection below cannot reach the prolog probe
until_true 30 test -e "$d/started" || fail "job $jid is $(jstate "$jid") and its script never started"
[ "$(nstate n3)" = alloc ] || [ "$(nstate n3)" = mix ] || fail "n3 is $(nstate n3) while the job runs"
log "job $jid running on n3, the prolog probe passed"
printf 'memtest=fail\n' > "$inj"
chmod 644 "$inj"
touch "$d/go"
until_true 30 is_state "$jid" COMPLETED || fail "job $jid is $(jstate "$jid")"
reason="sigma: probe full: host memtest=fail"
until_true 30 sh -c "scontrol show node n3 | grep -qF 'Reason=$reason'" ||
	fail "n3 not drained with '$reason' after the job: $(nreason n3)"
log "job $jid COMPLETED; n3 $(nstate n3): $(nreason n3)"
[ "$(jstate "$jid")" = COMPLETED ] || fail "the epilog failure changed the job to $(jstate "$jid")"
