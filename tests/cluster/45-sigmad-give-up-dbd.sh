#!/bin/bash
# A give-up decided after the job ended is written to the accounting record
# (slurmctld refuses to change a finished job). slurmctld sends the job's
# own end to slurmdbd asynchronously, and that record carries the
# controller's AdminComment: when it arrives after sigmad's write, it
# overwrites the account. sigmad used to write as soon as the job ended in
# slurmctld, and a slurmdbd that was slow or down then lost the give-up
# (seen in test 91 on a loaded machine). Here slurmdbd is down while the job
# ends: the account must be in sacct once it is back, and stay there.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
. "$SIGMA_SRCDIR/tests/cluster/sigmad-lib.sh"

DBD_PIDFILE=$SIGMA_TESTBED_DIR/run/slurmdbd.pid
dbd_start() {
	local p
	p=$(cat "$DBD_PIDFILE" 2>/dev/null)
	[ -n "$p" ] && kill -0 "$p" 2>/dev/null && return 0
	slurmdbd || fail "slurmdbd did not start"
	until_true 60 sh -c 'sacctmgr -n show cluster >/dev/null 2>&1' || fail "slurmdbd does not answer"
}
trap dbd_start EXIT

sigmad_fresh
d=$(workdir sigmad-give-up-dbd)
jid=$(cd "$d" && run_as_user sbatch --parsable -J giveup -N2 --exclusive --requeue \
	--sigma-spares=1 --sigma-max-restarts=0 --sigma-probe=off -o "$d/out" \
	--wrap "until [ -e '$d/go' ]; do sleep 1; done; exit 76") || fail "sbatch failed"
until_true 30 is_state "$jid" RUNNING || fail "job $jid not running: $(jstate "$jid")"
until_true 10 sh -c "scontrol show job $jid | grep -q 'AdminComment=sigma\['" ||
	fail "no sigma[] block: $(jfield "$jid" AdminComment)"
node=$(job_nodes "$jid" | tail -n 1)
log "job $jid on $(jfield "$jid" NodeList)"

# slurmdbd goes down; the job ends as a trainer whose peer died (76)
# and its node drains as failing, as the epilog probe would drain it
dbd=$(cat "$DBD_PIDFILE")
kill "$dbd"
until_true 20 sh -c "! kill -0 $dbd 2>/dev/null" || fail "slurmdbd did not stop"
run_as_user touch "$d/go"
until_true 30 sh -c "scontrol show job $jid | grep -q 'JobState=FAILED'" || fail "job $jid: $(jstate "$jid")"
scontrol update nodename="$node" state=drain reason='sigma: probe quick: host compute=fail'
until_true 20 sh -c "grep -q 'job $jid attempt 1: failure on $node.*give_up' '$SIGMAD_LOG'" ||
	fail "no give-up decided: $(tail -n 3 "$SIGMAD_LOG")"
log "give-up decided with slurmdbd down"
sleep 5
dbd_start
log "slurmdbd back"

want="sigma: attempt 1: $node .* -> not requeued: max_restarts=0 reached"
# From slurmdbd's return, every reading of the account: the give-up may
# only appear on a record whose end is in (slurmdbd fills a missing end
# with "now" unless asked not to truncate, and sigmad once took that for
# the end: slurmctld's own end record then overwrote the give-up), and once
# there it must stay, here for 8 s of readings.
seen=0
deadline=$((SECONDS + 60))
while [ "$seen" -lt 16 ]; do
	row=$(sacct -n -X -P -j "$jid" -o end,admincomment | tail -n 1)
	end=${row%%|*}
	if grep -q "$want" <<<"${row#*|}"; then
		[ "$end" != Unknown ] ||
			fail "the give-up was written before the job's end was recorded: $row"
		seen=$((seen + 1))
	elif [ "$seen" -gt 0 ]; then
		fail "the give-up was overwritten after $seen readings: $row"
	fi
	[ "$SECONDS" -lt "$deadline" ] ||
		fail "sacct lacks the give-up: $row; sigmad: $(grep "job $jid" "$SIGMAD_LOG" | tail -n 3)"
	sleep 0.5
done
"$SIGMACTL" --config "$SIGMA_TESTBED_DIR/etc/sigma.conf" history --job "$jid" | grep -q "give_up *job $jid" ||
	fail "history lacks the give-up"
scontrol update nodename="$node" state=resume
log "ok: $(sacct -n -X -P -j "$jid" -o end,admincomment | tail -n 1)"
