#!/bin/bash
# One contract between the parts, and the site's caps. The plugin used to
# accept --sigma-max-restarts up to 10000 while sigmad parsed at most 1000:
# a job asking for 5000 was accepted and then silently left unmanaged. Now
# both take their limits from lib/contract.h, and the site's caps in
# sigma.conf (the testbed: 2 spares a job and a user, 100 restarts) are
# refused at submit with a message naming the key; a job within them is
# accepted and managed by sigmad.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
. "$SIGMA_SRCDIR/tests/cluster/sigmad-lib.sh"
grep -q 'sigma.so' "$SIGMA_TESTBED_DIR/etc/plugstack.conf" || skip "sigma.so not loaded"
grep -q '^sigmad_max_restarts=100' "$SIGMA_TESTBED_DIR/etc/sigma.conf" ||
	skip "the testbed's sigma.conf has no site caps (restart the testbed)"

d=$(workdir sitecaps)
# refused OPTION WANT: sbatch with OPTION fails, saying WANT
refused() {
	local out
	out=$(cd "$d" && run_as_user sbatch --parsable -w n1 "$1" -o /dev/null --wrap true 2>&1) &&
		fail "$1 was accepted (job $out)"
	case "$out" in *"$2"*) ;; *) fail "$1: the refusal does not say '$2': $out" ;; esac
	log "$1: $(echo "$out" | grep sigma | head -1)"
}
refused --sigma-max-restarts=5000 "at most 100 (sigmad_max_restarts in $SIGMA_TESTBED_DIR/etc/sigma.conf)"
refused --sigma-max-restarts=10001 "expected a whole number from 0 to 10000"
refused --sigma-spares=3 "at most 2 spares a job (sigmad_max_spares_per_job"

sigmad_fresh
jid=$(cd "$d" && run_as_user sbatch --parsable -w n1 --sigma-max-restarts=100 --sigma-spares=2 \
	-o /dev/null --wrap 'sleep 60') || fail "a job within the caps was refused"
until_true 30 is_state "$jid" RUNNING || fail "job $jid not running"
until_true 15 sh -c "'$SIGMACTL' --config '$SIGMA_TESTBED_DIR/etc/sigma.conf' status --json | grep -q '\"job\":$jid,\"uid\":[0-9]*,\"state\":\"RUNNING\"'" ||
	fail "sigmad does not manage job $jid: $("$SIGMACTL" --config "$SIGMA_TESTBED_DIR/etc/sigma.conf" status)"
grep -q "job $jid: bad sigma" "$SIGMAD_LOG" && fail "sigmad calls job $jid's block bad"
log "job $jid ($(jfield "$jid" AdminComment)) is managed by sigmad"
scancel "$jid"
