#!/bin/bash
# A warning move must not kill a job that cannot checkpoint, nor call it a
# checkpoint. A plain job (it does not handle SIGUSR1) used to die of the
# signal (0:10) and restart from zero on a node that had only warned, with
# "checkpointed" in its AdminComment.
#   1. A job that says nothing (--sigma-on-warning defaults to drain-after)
#      is not signalled: it runs on, and its warned node drains after it.
#   2. A job that asks for the move (--sigma-on-warning=checkpoint) but dies
#      of the signal is moved, and its account says it was killed by the
#      signal, not checkpointed.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
. "$SIGMA_SRCDIR/tests/cluster/sigmad-lib.sh"
grep -q '^HealthCheckProgram=' "$SLURM_CONF" || skip "no HealthCheckProgram in the testbed"

sigmad_fresh
d=$(workdir sigmad-plain)
inj=""
trap 'rm -f $inj' EXIT
# warn JOB: inject a warning on the job's node; prints the node
warn() {
	local n
	n=$(jfield "$1" NodeList)
	inj="$inj $SIGMA_TESTBED_DIR/inject/$n"
	printf 'ecc_corrected_rate=40\n' > "$SIGMA_TESTBED_DIR/inject/$n"
	chmod 644 "$SIGMA_TESTBED_DIR/inject/$n"
	until_true 60 sh -c "scontrol show node $n | grep -q 'Reason=sigma: warning'" ||
		fail "$n not drained with the warning: $(nreason $n)"
	echo "$n"
}

a=$(submit_one "$d" plain)
na=$(warn "$a")
log "job $a (no --sigma-on-warning) on $na, which warned: $(nreason "$na")"
sleep 8
is_state "$a" RUNNING || fail "job $a is $(jstate "$a") after its node warned"
[ "$(jfield "$a" Restarts)" = 0 ] || fail "job $a was requeued"
[ "$(jfield "$a" NodeList)" = "$na" ] || fail "job $a moved to $(jfield "$a" NodeList)"
[ "$(nstate "$na")" = drng ] || fail "$na is $(nstate "$na"), not draining after its job"
"$SIGMACTL" --config "$SIGMA_TESTBED_DIR/etc/sigma.conf" history --job "$a" | grep -q 'drain-after' ||
	fail "history does not say why job $a was left running"
log "job $a left running on $na ($(nstate "$na")): drain-after"
scancel "$a"
rm -f "$SIGMA_TESTBED_DIR/inject/$na"

b=$(submit_one "$d" asked --sigma-on-warning=checkpoint)
nb=$(warn "$b")
log "job $b (--sigma-on-warning=checkpoint, dies of SIGUSR1) on $nb"
until_true 60 sh -c "scontrol show job $b | grep -q 'AdminComment=.*sigma: attempt 2'" ||
	fail "job $b not moved: $(jstate "$b") $(jfield "$b" AdminComment)"
ac=$(scontrol show job "$b" | sed -n "s/^ *AdminComment=//p")
log "AdminComment: $ac"
case "$ac" in
*"killed by signal 10, not a checkpoint"*) ;;
*) fail "the account does not say job $b died of the signal: $ac" ;;
esac
case "$ac" in *checkpointed*) fail "the account calls it checkpointed: $ac" ;; esac
scancel "$b"
