#!/bin/bash
# sigmad keeps the spares n5,n6 in a reservation that ordinary jobs cannot
# use; sigmactl answers status and spares; mutating commands are refused
# to a normal user; a normal user's history holds only their own jobs;
# sigmactl says so clearly when sigmad is not running.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
. "$SIGMA_SRCDIR/tests/cluster/sigmad-lib.sh"

sigmad_fresh
log "reservation: $(scontrol show reservation sigma_spares | head -3 | tr '\n' ' ')"
scontrol show reservation sigma_spares | grep -q 'Flags=.*IGNORE_JOBS' || fail "reservation does not ignore jobs"

# an ordinary 6-node job cannot start: two nodes are held
d=$(workdir sigmad-spares)
jid=$(cd "$d" && run_as_user sbatch --parsable -N6 -o /dev/null --wrap 'hostname')
sleep 4
[ "$(jstate "$jid")" = PENDING ] || fail "a 6-node job got the spares: $(jstate "$jid")"
log "6-node job pends: $(jfield "$jid" Reason)"
scancel "$jid"

out=$("$SIGMACTL" status) || fail "sigmactl status failed"
echo "$out"
echo "$out" | grep -q '^spares: n5,n6 (2 of 2' || fail "status does not show the spares"
"$SIGMACTL" spares | grep -q 'reservation sigma_spares: n5,n6' || fail "sigmactl spares"
# scripts read --json: every command, one object a line
"$SIGMACTL" spares --json | grep -q '^{"reservation":"sigma_spares","pool":\["n5","n6"\],' ||
	fail "sigmactl spares --json: $("$SIGMACTL" spares --json)"
"$SIGMACTL" --json status | grep -q '"jobs":\[' || fail "sigmactl status --json: $("$SIGMACTL" status --json)"
echo "$out" | grep -Eq 'since [0-9]{9,}' && fail "status prints epoch seconds: $out"

# mutating commands: root and SlurmUser only
if out=$(run_as_user "$SIGMACTL" --config "$SIGMA_TESTBED_DIR/etc/sigma.conf" drain n1 --reason test 2>&1); then
	fail "non-root drain was accepted: $out"
fi
echo "$out" | grep -q 'permission denied' || fail "unclear refusal: $out"
[ "$(nstate n1)" = idle ] || fail "n1 changed state: $(nstate n1)"
run_as_user "$SIGMACTL" --config "$SIGMA_TESTBED_DIR/etc/sigma.conf" spares remove n5 2>/dev/null &&
	fail "non-root spares remove accepted"
grep -q "refused 'drain' from uid $(id -u "$SIGMA_TEST_USER")" "$SIGMAD_LOG" ||
	fail "sigmad did not log the refusal"

# root may drain and resume through sigmactl
"$SIGMACTL" drain n1 --reason "cluster test" --json | grep -q '^{"ok":true,"message":"n1 drained: ' ||
	fail "root drain refused"
case "$(nreason n1)" in "sigma: admin: cluster test"*) ;; *) fail "reason: $(nreason n1)" ;; esac
"$SIGMACTL" resume n1 || fail "root resume refused"
until_true 10 sh -c '[ "$(sinfo -h -n n1 -o %t)" = idle ]' || fail "n1 not back: $(nstate n1)"

# history: root sees node events; the user sees none of them
"$SIGMACTL" history --node n1 | grep -q 'drain.*n1: sigma: admin: cluster test' ||
	fail "history lacks the drain: $("$SIGMACTL" history)"
uid=$(id -u "$SIGMA_TEST_USER")
"$SIGMACTL" history --json | grep -q '"type":"drain"' || fail "root sees no drain event"
h=$(run_as_user "$SIGMACTL" --config "$SIGMA_TESTBED_DIR/etc/sigma.conf" history --json)
n=$(printf '%s' "$h" | grep -c . || true)
own=$(printf '%s' "$h" | grep -c "\"job\":[0-9]*,\"uid\":$uid," || true)
log "the user sees $n events, $own of their own jobs"
[ "$n" = "$own" ] || fail "a normal user sees $((n - own)) events that are not their jobs'"

# no sigmad: a clear error
sigmad_stop
if out=$("$SIGMACTL" status 2>&1); then fail "status succeeded without sigmad"; fi
echo "$out" | grep -q 'sigmad is not running' || fail "unclear error: $out"
# startup errors reach the shell
if out=$("$SIGMAD" --config /nonexistent/sigma.conf 2>&1); then fail "sigmad started without config"; fi
echo "$out" | grep -q '/nonexistent/sigma.conf' || fail "unclear startup error: $out"
sigmad_start
log "ok"
