#!/bin/bash
# The pool keeps to the configured spares. A repaired primary that rejoins
# while the pool is short stands in for the missing spare; once the real
# spare is free again it takes its place back and the stand-in returns to
# service. It used to stay: after a few recoveries the reservation held
# n3,n6 while sigmactl said "members n5,n6", and n5 ran ordinary jobs.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
. "$SIGMA_SRCDIR/tests/cluster/sigmad-lib.sh"
[ -x "$PROBE" ] || skip "sigma-probe not built: the repair needs its full probe"
grep -q '^HealthCheckProgram=' "$SLURM_CONF" || skip "no HealthCheckProgram in the testbed"

sigmad_fresh
d=$(workdir sigmad-drift)
jid=$(submit_sigma "$d")
inj=$SIGMA_TESTBED_DIR/inject/n3
trap 'rm -f "$inj"' EXIT
echo "ecc_uncorrected=2" > "$inj"
until_true 60 running_without "$jid" n3 || fail "job $jid not moved off n3: $(jstate "$jid") $(jfield "$jid" NodeList)"
spare=$(job_nodes "$jid" | grep -E '^n[56]$')
log "job $jid moved onto $spare; pool $(resv_nodes)"
rm -f "$inj"
until_true 90 resv_has n3 || fail "n3 did not stand in for $spare: $(nstate n3) $(nreason n3); pool $(resv_nodes)"
log "n3 repaired, stands in: pool $(resv_nodes)"
scancel "$jid"
until_true 30 sh -c "resv_has() { scontrol show hostnames \"\$(scontrol show reservation sigma_spares | sed -n 's/^ *Nodes=\([^ ]*\).*/\1/p')\" | grep -qx \"\$1\"; }; resv_has n5 && resv_has n6 && ! resv_has n3" ||
	fail "the pool did not go back to n5,n6 once $spare was free: $(resv_nodes)"
until_true 10 sh -c '[ "$(sinfo -h -n n3 -o %t)" = idle ]' || fail "n3 is $(nstate n3), not back in service"
log "pool $(resv_nodes); n3 $(nstate n3)"
"$SIGMACTL" --config "$SIGMA_TESTBED_DIR/etc/sigma.conf" history --node n3 | grep -q 'pool' ||
	fail "history does not show the pool change"
