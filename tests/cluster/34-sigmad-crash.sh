#!/bin/bash
# sigmad is killed with SIGKILL in the middle of a recovery (the job was
# signalled and is slow to stop) and started again: the recovery completes,
# exactly once: one signal, one requeue, one account in AdminComment.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
. "$SIGMA_SRCDIR/tests/cluster/sigmad-lib.sh"

sigmad_fresh
d=$(workdir sigmad-crash)
jid=$(submit_sigma "$d" IGNORE_USR1=1)
log "job $jid on $(jfield "$jid" NodeList) (notes SIGUSR1 but keeps running)"
scontrol update nodename=n4 state=drain reason='sigma: warning: probe quick: host temp_c=90 (warn 85)'
until_true 20 sh -c "[ \"\$(grep -c '\"type\":\"signal\",\"job\":$jid,' '$SIGMAD_EVENTS')\" -ge 1 ]" ||
	fail "sigmad did not signal job $jid"
until_true 10 sh -c "grep -q 'got USR1' '$d/out'" || fail "the job did not get SIGUSR1"
kill -9 "$(sigmad_pid)"
log "sigmad killed mid-recovery (job $jid signalled, still $(jstate "$jid"))"
sleep 2
is_state "$jid" RUNNING || fail "job $jid moved while sigmad was dead"
sigmad_start
log "sigmad restarted"
until_true 60 running_without "$jid" n4 || fail "recovery not completed: $(jstate "$jid") $(jfield "$jid" NodeList)"
log "job $jid on $(jfield "$jid" NodeList)"
sleep 5   # a few more rounds: nothing may be repeated
for t in decide signal release requeue complete; do
	n=$(events "$t" "$jid")
	[ "$n" = 1 ] || fail "$n '$t' events for job $jid, expected 1"
done
n=$(grep -c 'got USR1' "$d/out")
[ "$n" = 1 ] || fail "the job got SIGUSR1 $n times"
[ "$(jfield "$jid" Restarts)" = 1 ] || fail "job restarted $(jfield "$jid" Restarts) times"
ac=$(scontrol show job "$jid" | sed -n 's/^ *AdminComment=//p')
n=$(echo "$ac" | grep -o 'sigma: attempt 2:' | wc -l)
[ "$n" = 1 ] || fail "AdminComment holds $n accounts: $ac"
log "ok"
