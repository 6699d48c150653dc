#!/bin/bash
# slurmd of a node of a running sigma job is killed: once Slurm marks the
# node not responding, sigmad sets it down and drained, and the job runs
# again on a spare within 30 s, with no error in sigmad's log.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
. "$SIGMA_SRCDIR/tests/cluster/sigmad-lib.sh"

sigmad_fresh
d=$(workdir sigmad-kill)
jid=$(submit_sigma "$d")
log "job $jid on $(jfield "$jid" NodeList)"
pid=$(cat "$SIGMA_TESTBED_DIR/run/slurmd-n2.pid")
kill -9 "$pid"
log "slurmd n2 (pid $pid) killed"
until_true 60 sh -c 'sinfo -h -n n2 -o %t | grep -q "\*"' || fail "Slurm never marked n2"
t0=$(date +%s)
log "Slurm marks n2: $(nstate n2)"
# running again without n2 on a spare, and the AdminComment says so
until_true 30 moved_to_spare "$jid" n2 || fail "job $jid not running again on a spare without n2 30 s later: $(jstate "$jid") $(jfield "$jid" NodeList)"
log "job $jid running on $(jfield "$jid" NodeList) $(( $(date +%s) - t0 ))s after Slurm marked n2"
scontrol show node n2 | grep -q 'State=DOWN.*DRAIN' || fail "n2 not down and drained: $(nstate n2)"
ac=$(scontrol show job "$jid" | sed -n 's/^ *AdminComment=//p')
echo "$ac" | grep -q 'sigma: attempt 2: n2 not responding -> requeued onto n[56]' || fail "AdminComment: $ac"
until_true 10 sh -c "grep -q '^attempt 1 step' '$d/out'" || fail "attempt 1 prints no steps"
# Slurm requeues the job itself once sigmad sets n2 down, often before
# sigmad's own requeue: that is the requeue done, not a refused call
no_sigmad_errors "$jid"
log "ok"
