#!/bin/bash
# A rank of a pp 2 x dp 2 x ep 2 run (4 ranks on 4 nodes) killed with
# SIGKILL mid-run: its pipeline neighbour, expert group and data-parallel
# group all lose a peer; the step ends within a bounded time with 76 (a
# rank saw the failure) or 128 + a signal (Slurm tore the step down), and
# nothing hangs. A rank stopped with SIGSTOP: the watchdog of the ranks
# waiting for it (in a pipeline transfer or an expert all-to-all) ends the
# step with 76 after SIGMA_COMM_TIMEOUT.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
need_train

TIMEOUT=20
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive SIGMA_COMM_TIMEOUT=$TIMEOUT
d=$(workdir train-parallel-kill)
"$TRAIN" prepare --train-out "$d/train.tok" --val-out "$d/val.tok" "$F/fortunes" >/dev/null ||
	fail "prepare failed"
ARGS="--train $d/train.tok --preset small --batch 8 --steps 1000000 --warmup 2 --threads 1
	--log-every 5 --eval-every 0 --pp 2 --dp 2 --ep 2 --micro 2"

# victim OUT RANK: pid of RANK from the rank line it printed
victim() { sed -n "s/.*rank $2 of 4 on [^,]*, pid \([0-9]*\):.*/\1/p" "$1" | head -1; }

# trial NAME RANK SIGNAL WITHIN: send SIGNAL to RANK after step 10; the step
# must end within WITHIN seconds with 76 or 128 + a signal
trial() {
	local name=$1 rank=$2 sig=$3 within=$4 out=$d/$1.out srun_pid pid t0 rc
	srun --mpi=pmix --kill-on-bad-exit=1 -N4 -n4 "$TRAIN" $ARGS > "$out" 2>&1 &
	srun_pid=$!
	until_true 90 grep -q '^step 10/' "$out" ||
		{ kill "$srun_pid"; fail "$name: training did not start: $(tail -n 5 "$out")"; }
	pid=$(victim "$out" "$rank")
	[ -n "$pid" ] || { kill "$srun_pid"; fail "$name: no pid of rank $rank: $(head -n 5 "$out")"; }
	grep -q "rank $rank of 4 .*stage 1" "$out" || { kill "$srun_pid"; fail "$name: rank $rank is not on stage 1"; }
	t0=$(date +%s)
	kill "-$sig" "$pid"
	until_true "$within" bash -c "! kill -0 $srun_pid 2>/dev/null" ||
		{ kill -KILL "$pid"; kill "$srun_pid"; fail "$name: the step was still running ${within}s after rank $rank got SIG$sig"; }
	wait "$srun_pid"
	rc=$?
	grep -v '^step' "$out" | tail -n 5
	log "$name: srun exit $rc $(( $(date +%s) - t0 ))s after SIG$sig to rank $rank"
	[ "$rc" = 76 ] || [ "$rc" -gt 128 ] ||
		fail "$name: srun exited $rc: expected 76 or 128 + a signal"
}

log "SIGKILL to rank 3 (stage 1, ep_rank 1)"
trial kill 3 KILL $((TIMEOUT + 15))
log "SIGSTOP to rank 2 (stage 1, ep_rank 0)"
trial stop 2 STOP $((TIMEOUT + 25))
grep -q 'watchdog\|stuck\|timed out' "$d/stop.out" || fail "no rank reported the stuck call: $(grep -v '^step' "$d/stop.out" | tail)"
log "ok"
