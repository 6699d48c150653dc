#!/bin/bash
# A failure the job's full prolog probe finds on n2 (an injected memory-test
# failure, which the quick health check does not measure): n2 is drained
# with a sigma: reason that sinfo -R, scontrol show node and sacctmgr show
# event all show, and the batch job is requeued and completes on two other
# nodes. (Two: with sigmad running, the spares, and at times a repaired
# primary node, are held in its reservation.)
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
grep -q 'sigma.so' "$SIGMA_TESTBED_DIR/etc/plugstack.conf" || skip "sigma.so not loaded"

inj=$SIGMA_TESTBED_DIR/inject/n2
trap 'rm -f "$inj"' EXIT
printf 'memtest=fail\n' > "$inj"
chmod 644 "$inj"
reason="sigma: probe full: host memtest=fail"

d=$(workdir prologdrain)
t0=$(date +%s)
jid=$(cd "$d" && run_as_user sbatch --parsable -N2 --constraint=primary --sigma-probe=full --sigma-max-restarts=2 \
	-o "$d/out-%j" --wrap 'srun sh -c "echo \$SLURMD_NODENAME" | sort; echo "attempt=$SIGMA_ATTEMPT"') ||
	fail "sbatch failed"
log "job $jid submitted"
until_true 60 sh -c "scontrol show node n2 | grep -qF 'Reason=$reason'" ||
	fail "n2 not drained with '$reason': $(nreason n2)"
log "n2: $(nreason n2)"
sinfo -R -h -o '%E|%N' | grep -qF "$reason|n2" || fail "sinfo -R: $(sinfo -R)"
until_true 120 is_state "$jid" COMPLETED ||
	fail "job $jid is $(jstate "$jid") after 120 s: $(scontrol show job "$jid" | grep -E 'Reason|Restarts|NodeList')"
log "job $jid COMPLETED after $(( $(date +%s) - t0 )) s on $(jfield "$jid" NodeList)"
cat "$d/out-$jid"
[ "$(jfield "$jid" Restarts)" -ge 1 ] || fail "job $jid was not requeued (Restarts=$(jfield "$jid" Restarts))"
grep -q '^n2$' "$d/out-$jid" && fail "the requeued job ran on n2"
[ "$(grep -c '^n[0-9]$' "$d/out-$jid")" = 2 ] || fail "expected 2 hosts in the output"
grep -qx 'attempt=[1-9]' "$d/out-$jid" || fail "SIGMA_ATTEMPT did not count the requeue"
until_true 30 sh -c "sacctmgr -n -P show event nodes=n2 format=reason | grep -qF '$reason'" ||
	fail "sacctmgr show event lacks the reason: $(sacctmgr -n -P show event nodes=n2 format=nodename,state,reason)"
log "sacctmgr show event: $(sacctmgr -n -P show event nodes=n2 format=nodename,state,reason | tail -1)"
