# tests/cluster/sigmad-lib.sh - helpers of the sigmad tests (30-39), sourced
# after lib.sh. Each test starts sigmad afresh with its spares n5,n6.

SIGMAD=$SIGMA_BUILDDIR/sbin/sigmad
SIGMACTL=$SIGMA_BUILDDIR/sbin/sigmactl
[ -x "$SIGMAD" ] && [ -x "$SIGMACTL" ] || skip "sigmad or sigmactl not built in $SIGMA_BUILDDIR"
SIGMAD_PIDFILE=$SIGMA_TESTBED_DIR/run/sigmad.pid
SIGMAD_LOG=$SIGMA_TESTBED_DIR/log/sigmad.log
SIGMAD_EVENTS=$SIGMA_TESTBED_DIR/lib/sigmad/events.jsonl
PROBE=$SIGMA_BUILDDIR/sbin/sigma-probe

sigmad_pid() { cat "$SIGMAD_PIDFILE" 2>/dev/null; }
sigmad_alive() { local p; p=$(sigmad_pid); [ -n "$p" ] && kill -0 "$p" 2>/dev/null; }
sigmad_start() {
	"$SIGMAD" --config "$SIGMA_TESTBED_DIR/etc/sigma.conf" --pidfile "$SIGMAD_PIDFILE" \
		--logfile "$SIGMAD_LOG" || fail "sigmad did not start"
}
sigmad_stop() {
	local p
	p=$(sigmad_pid)
	[ -n "$p" ] && kill "$p" 2>/dev/null
	until_true 20 sh -c "! kill -0 $p 2>/dev/null" || fail "sigmad $p did not stop"
}
resv_nodes() { scontrol show reservation sigma_spares 2>/dev/null | sed -n 's/^ *Nodes=\([^ ]*\).*/\1/p'; }
resv_has() { scontrol show hostnames "$(resv_nodes)" 2>/dev/null | grep -qx "$1"; }
# a fresh sigmad: the pool rebuilt from the spare feature (n5,n6)
sigmad_fresh() {
	sigmad_alive && sigmad_stop
	scontrol delete reservation=sigma_spares 2>/dev/null || true
	sigmad_start
	until_true 15 sh -c '[ "$(scontrol show hostnames "$(scontrol show reservation sigma_spares 2>/dev/null | sed -n "s/^ *Nodes=\([^ ]*\).*/\1/p")" 2>/dev/null | tr "\n" ,)" = n5,n6, ]' ||
		fail "spares n5,n6 not reserved: $(resv_nodes)"
}
# job_nodes JOB: the job's nodes, one a line
job_nodes() { scontrol show hostnames "$(jfield "$1" NodeList)" 2>/dev/null; }
job_on() { job_nodes "$1" | grep -qx "$2"; }
# running_without JOB NODE: running, and not on NODE. State and nodes come
# from one `scontrol show job`: two reads can straddle the job's exit and
# requeue, and a node list read after the state (empty, or "(null)" once
# the job left) would pass for "not on NODE".
running_without() {
	local rec state nodes
	rec=$(scontrol show job "$1" 2>/dev/null) || return 1
	state=$(rec_state "$rec")
	nodes=$(rec_field "$rec" NodeList)
	[ "$state" = RUNNING ] && [ -n "$nodes" ] && [ "$nodes" != "(null)" ] || return 1
	! scontrol show hostnames "$nodes" 2>/dev/null | grep -qx "$2"
}
# moved_to_spare JOB NODE: running again without NODE, on a pool spare.
# While Slurm requeues a job its state can read RUNNING on what is left of
# the old allocation (n1 alone), before sigmad has moved it.
moved_to_spare() {
	running_without "$1" "$2" && job_nodes "$1" | grep -qx 'n[56]'
}
# no_sigmad_errors JOB: sigmad logged no error naming JOB, else fail
no_sigmad_errors() {
	local errs
	errs=$(grep "sigmad: error: .*\b$1\b" "$SIGMAD_LOG")
	[ -z "$errs" ] || fail "sigmad logged errors for job $1: $errs"
}

# The test job: loops printing its step; on SIGUSR1 it says so and exits
# 75 (checkpoint written, requeue me), as sigma-train does. With IGNORE=1
# it only notes the signal (a trainer that is slow to stop).
write_job() {
	cat > "$1/job.sh" <<'JOB'
#!/bin/bash
if [ "${IGNORE_USR1:-0}" = 1 ]; then
	trap 'echo "attempt ${SLURM_RESTART_COUNT:-0}: got USR1 at step $i"' USR1
else
	trap 'echo "attempt ${SLURM_RESTART_COUNT:-0}: USR1 at step $i: checkpoint written, exit 75"; exit 75' USR1
fi
i=0
while :; do
	echo "attempt ${SLURM_RESTART_COUNT:-0} step $i on $SLURM_JOB_NODELIST"
	i=$((i + 1))
	sleep 1 & wait $!
done
JOB
	chmod 755 "$1/job.sh"
}

# submit_sigma DIR [ENV=VALUE...]: a 4-node sigma job (spares=1,
# max_restarts=3) of the test user, running on n1-n4; prints its id. The
# plugin's prolog writes the sigma[...] block; without the plugin the test
# writes it as root, as the prolog would. SUBMIT_REQUEUE replaces its
# --requeue (--requeue=expedite).
submit_sigma() {
	local d=$1 jid opts="" block="sigma[probe=off,spares=1,max_restarts=3,ckpt_every=10,on_warning=checkpoint]"
	shift
	write_job "$d"
	grep -q '^required' "$SIGMA_TESTBED_DIR/etc/plugstack.conf" 2>/dev/null &&
		opts="--sigma-spares=1 --sigma-max-restarts=3 --sigma-probe=off --sigma-on-warning=checkpoint"
	# shellcheck disable=SC2086
	jid=$(cd "$d" && run_as_user env "$@" sbatch --parsable -N4 "${SUBMIT_REQUEUE:---requeue}" \
		--open-mode=append $opts -o "$d/out" "$d/job.sh") || fail "sbatch failed"
	until_true 30 is_state "$jid" RUNNING || fail "job $jid not running: $(jstate "$jid")"
	case "$(jfield "$jid" AdminComment)" in
	sigma\[*) ;;
	*) scontrol update jobid="$jid" admincomment="$block" || fail "cannot set AdminComment" ;;
	esac
	until_true 10 sh -c "grep -q 'step 1 ' '$d/out'" || fail "job $jid prints no steps"
	echo "$jid"
}

# events TYPE JOB: how many TYPE events the log holds for JOB
events() { grep -c "\"type\":\"$1\",\"job\":$2," "$SIGMAD_EVENTS" 2>/dev/null || true; }

# submit_one DIR NAME [SBATCH OPTIONS...]: a 1-node sigma job of the test
# user that prints its attempt and sleeps (spares=1, max_restarts=3);
# prints its id once it runs (no -w: a requeue must be free to move it)
submit_one() {
	local d=$1 name=$2 jid
	shift 2
	jid=$(cd "$d" && run_as_user sbatch --parsable -J "$name" -N1 --exclusive \
		--requeue --sigma-spares=1 --sigma-max-restarts=3 --sigma-probe=off \
		--open-mode=append -o "$d/$name.out" "$@" \
		--wrap 'echo "attempt ${SLURM_RESTART_COUNT:-0} on $SLURMD_NODENAME"; sleep 600') ||
		fail "sbatch $name failed"
	until_true 30 is_state "$jid" RUNNING || fail "job $jid ($name) not running: $(jstate "$jid")"
	echo "$jid"
}
# filler NODE: a plain job of the test user keeping NODE busy; prints its id
filler() {
	local jid
	jid=$(run_as_user sbatch --parsable -N1 -w "$1" --exclusive -o /dev/null --wrap 'sleep 600') ||
		fail "filler on $1 failed"
	until_true 30 is_state "$jid" RUNNING || fail "filler $jid on $1 not running"
	echo "$jid"
}
