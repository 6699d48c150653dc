#!/bin/bash
# sigma-probe as slurmd's HealthCheckProgram: an injected failure drains the
# node with "sigma: probe quick: ..."; a node drained by someone else keeps
# its reason; a world-writable injection file is refused and ignored.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
probe=$SIGMA_BUILDDIR/sbin/sigma-probe
[ -x "$probe" ] || skip "sigma-probe not built"
grep -q '^HealthCheckProgram=' "$SLURM_CONF" || skip "no HealthCheckProgram in the testbed"
interval=$(sed -n 's/^HealthCheckInterval=//p' "$SLURM_CONF")
conf=$SIGMA_TESTBED_DIR/etc/sigma.conf
inj=$SIGMA_TESTBED_DIR/inject
trap 'rm -f "$inj/n4" "$inj/n5" "$inj/n6"' EXIT

# 1. a world-writable injection file: the probe says so and ignores it
printf 'temp_c=97\n' > "$inj/n6"
chmod 666 "$inj/n6"
out=$("$probe" --config "$conf" --node n6 quick 2>&1)
rc=$?
[ $rc = 0 ] || fail "probe with a refused injection file exited $rc: $out"
grep -q 'injection refused.*group- or world-writable' <<<"$out" || fail "no refusal message: $out"
log "n6: $(grep refused <<<"$out")"

# 2. an injected failure: the health check drains the node
printf 'temp_c=97\n' > "$inj/n4"
chmod 644 "$inj/n4"
reason="sigma: probe quick: host temp_c=97 (limit 95)"
until_true $((interval * 3 + 10)) sh -c "scontrol show node n4 | grep -qF 'Reason=$reason'" ||
	fail "n4 not drained by the health check: $(nreason n4)"
log "n4: $(nreason n4)"

# 3. drained by an admin for another reason: left alone
scontrol update nodename=n5 state=drain reason="disk swap"
printf 'ecc_uncorrected=3\n' > "$inj/n5"
chmod 644 "$inj/n5"
sleep $((interval * 2 + 2))
[ "$(nreason n5 | sed 's/ \[.*//')" = "disk swap" ] || fail "n5's reason was changed: $(nreason n5)"
log "n5 kept its reason: $(nreason n5)"

# the world-writable file never drained n6
case "$(nstate n6)" in
drain* | drng) fail "n6 drained from a refused injection file: $(nreason n6)" ;;
esac
log "n6 still $(nstate n6)"
