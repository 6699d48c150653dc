#!/bin/bash
# A user who fills the shared checkpoint root must not drain nodes. As the
# test user, a job fills ckpt_root (here a small tmpfs mounted over it, as a
# full /scratch would be): every probe (the health check on every node,
# the job's prolog and epilog) reads its free space below the limits, says
# "cannot judge" (exit 4, in --json and the metrics) and drains nothing;
# the job completes. A real node fault still drains (tests 22, 25).
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
grep -q 'sigma.so' "$SIGMA_TESTBED_DIR/etc/plugstack.conf" || skip "sigma.so not loaded"
grep -q '^HealthCheckProgram=' "$SLURM_CONF" || skip "no HealthCheckProgram in the testbed"
PROBE=$SIGMA_BUILDDIR/sbin/sigma-probe
interval=$(sed -n 's/^HealthCheckInterval=//p' "$SLURM_CONF")

R=$SIGMA_TESTBED_DIR/ckpt
d=$(workdir userfilled)
mount -t tmpfs -o size=8m,mode=755 sigma-test-ckpt "$R" || skip "cannot mount a tmpfs here"
trap 'umount -l "$R" 2>/dev/null' EXIT
sigma_drained() { sinfo -h -R -o '%E|%n' | grep '^sigma:' || true; }
[ -z "$(sigma_drained)" ] || fail "setup: nodes drained by sigma already: $(sigma_drained)"

jid=$(cd "$d" && run_as_user sbatch --parsable -w n1 -J fill --sigma-ckpt-every=5 \
	-o "$d/out-%j" --wrap 'dd if=/dev/zero of="$SIGMA_CKPT_DIR/fill" bs=1M count=8 2>&1 | tail -1; df -h "$SIGMA_CKPT_DIR" | tail -1; touch '"$d"'/full; sleep '"$((interval * 3))") ||
	fail "sbatch failed"
until_true 60 test -e "$d/full" || fail "job $jid never filled $R: $(jstate "$jid"), $(cat "$d/out-$jid" 2>/dev/null)"
log "job $jid filled $R: $(df -h "$R" | tail -1)"
out=$("$PROBE" --config "$SIGMA_TESTBED_DIR/etc/sigma.conf" --node n2 --json quick)
rc=$?
[ "$rc" = 4 ] || fail "sigma-probe exit $rc, not 4 (cannot judge): $out"
case "$out" in
*'"verdict":"cannot_judge"'*'"key":"disk_free_gb"'*'"verdict":"cannot_judge"'*) ;;
*) fail "--json does not say cannot_judge for disk_free_gb: $out" ;;
esac
"$PROBE" --config "$SIGMA_TESTBED_DIR/etc/sigma.conf" --node n2 --metrics "$d/metrics" quick >/dev/null
grep -q '^sigma_probe_verdict{node="n2",level="quick"} 4$' "$d/metrics" ||
	fail "metrics: $(grep verdict "$d/metrics")"
log "sigma-probe: exit 4, $(echo "$out" | sed 's/.*"summary":"\([^"]*\)".*/\1/')"
# two health-check rounds on every node while the disk stays full
sleep $((interval * 2 + 2))
[ -z "$(sigma_drained)" ] || fail "a full checkpoint root drained nodes: $(sigma_drained)"
until_true $((interval * 3 + 30)) is_state "$jid" COMPLETED || fail "job $jid is $(jstate "$jid")"
[ -z "$(sigma_drained)" ] || fail "the epilog drained: $(sigma_drained)"
log "job $jid COMPLETED; no node drained: $(sinfo -h -o '%t %D' | tr '\n' ' ')"
