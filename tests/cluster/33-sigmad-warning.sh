#!/bin/bash
# An early warning on n2 moves the job off it before any failure: sigmad
# asks the job to checkpoint (SIGUSR1, the job exits 75), requeues it onto a
# spare and keeps n2 drained. Clearing the injection returns n2, after its
# cool-down and a healthy full probe, to the spare pool.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
. "$SIGMA_SRCDIR/tests/cluster/sigmad-lib.sh"

sigmad_fresh
d=$(workdir sigmad-warn)
jid=$(submit_sigma "$d")
log "job $jid on $(jfield "$jid" NodeList)"
probe=0
if [ -x "$PROBE" ] && grep -q '^HealthCheckProgram' "$SLURM_CONF"; then
	probe=1
	echo "temp_c=90" > "$SIGMA_TESTBED_DIR/inject/n2"   # over temp_warn_c, under the limit
else
	scontrol update nodename=n2 state=drain reason='sigma: warning: probe quick: host temp_c=90 (warn 85)'
fi
until_true 40 sh -c 'scontrol show node n2 | grep -q "Reason=sigma: warning: probe"' ||
	fail "n2 not drained with a warning: $(nreason n2)"
log "n2: $(nstate n2): $(nreason n2)"
until_true 40 running_without "$jid" n2 || fail "job $jid not moved off n2: $(jstate "$jid") $(jfield "$jid" NodeList)"
log "job $jid moved to $(jfield "$jid" NodeList)"
grep -q '^attempt 0: USR1 at step .*exit 75' "$d/out" || fail "the job was not asked to checkpoint: $(tail -5 "$d/out")"
sacct -n -D -X -j "$jid" -o state | grep -q NODE_FAIL && fail "the job saw a node failure"
scontrol show node n2 | grep -q 'State=[A-Z]*+DRAIN' || fail "n2 not drained: $(nstate n2)"
ac=$(scontrol show job "$jid" | sed -n 's/^ *AdminComment=//p')
echo "$ac" | grep -q 'sigma: attempt 2: n2 warning .* -> checkpointed, requeued onto n[56]' || fail "AdminComment: $ac"
"$SIGMACTL" history --job "$jid" | grep -q "signal *job $jid attempt 2" || fail "history lacks the signal"

[ "$probe" = 1 ] || skip "sigma-probe not built: return to service needs its full probe"
resv_has n2 && fail "n2 in the pool while still warning"
rm -f "$SIGMA_TESTBED_DIR/inject/n2"
log "injection cleared"
until_true 90 resv_has n2 || fail "n2 did not return to the pool: $(nstate n2) $(nreason n2); pool $(resv_nodes)"
log "n2 back in the pool: $(resv_nodes), state $(nstate n2)"
"$SIGMACTL" history --node n2 | grep -q 'return .*pool n2' || fail "history lacks the return"
log "ok"
