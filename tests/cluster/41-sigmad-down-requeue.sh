#!/bin/bash
# A failure while sigmad is down, which Slurm handles itself: sigmad is
# stopped, slurmd of a node of a running sigma job is killed, Slurm marks
# the node down and requeues the job (NODE_FAIL). When sigmad starts again
# it must recover the job onto a spare. It used to leave it PENDING with no
# excluded nodes and no event while both spares sat idle: the job's last
# nodes were kept only in memory.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
. "$SIGMA_SRCDIR/tests/cluster/sigmad-lib.sh"

sigmad_fresh
d=$(workdir sigmad-down)
jid=$(submit_sigma "$d")
sleep 2 # a poll or two: sigmad has seen the job run
sigmad_stop
log "job $jid on $(jfield "$jid" NodeList); sigmad stopped"
pid=$(cat "$SIGMA_TESTBED_DIR/run/slurmd-n2.pid")
kill -9 "$pid"
log "slurmd n2 (pid $pid) killed"
until_true 120 sh -c "[ \"\$(scontrol show job $jid | sed -n 's/.*Restarts=\([0-9]*\).*/\1/p')\" -ge 1 ]" ||
	fail "Slurm did not requeue job $jid: $(jstate "$jid") restarts $(jfield "$jid" Restarts)"
log "Slurm requeued job $jid: $(jstate "$jid"), n2 $(nstate n2)"
sleep 12 # past the requeued job's begin time
sigmad_start
t0=$(date +%s)
until_true 40 running_without "$jid" n2 ||
	fail "job $jid not running 40 s after sigmad started: $(jstate "$jid") ($(jfield "$jid" Reason)) on $(jfield "$jid" NodeList), pool $(resv_nodes)"
log "job $jid running on $(jfield "$jid" NodeList) $(( $(date +%s) - t0 ))s after sigmad started"
case "$(job_nodes "$jid" | tr '\n' ' ')" in *n5*|*n6*) ;; *) fail "not on a spare" ;; esac
"$SIGMACTL" --config "$SIGMA_TESTBED_DIR/etc/sigma.conf" history --job "$jid" | grep -q "decide.*job $jid" ||
	fail "no decision in the history"
