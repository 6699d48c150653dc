#!/bin/bash
# sigma-train data parallel under srun --mpi=pmix across two nodes: the same
# global batch and seed give the same losses as one process (within fp32
# reordering) for 20 steps and the same weights; two dp 2 runs give the same
# bits; only rank 0 prints progress; a layout that cannot work is refused.
# Small gradient buckets make the backward pass start several all-reduces.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
need_train
command -v h5diff >/dev/null || skip "h5diff not installed"

export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive SIGMA_COMM_TIMEOUT=60
d=$(workdir train-dp)
"$TRAIN" prepare --train-out "$d/train.tok" --val-out "$d/val.tok" "$F/fortunes" >/dev/null ||
	fail "prepare failed"
ARGS="--train $d/train.tok --val $d/val.tok --preset small --batch 8 --steps 20
	--warmup 2 --seed 5 --threads 1 --log-every 1 --eval-every 10 --eval-batches 2"

# run NAME NODES TASKS [FLAGS]: train into $d/NAME (checkpoint, metrics, output)
run() {
	local name=$1 nodes=$2 tasks=$3
	shift 3
	timeout 120 srun --mpi=pmix --kill-on-bad-exit=1 -N"$nodes" -n"$tasks" \
		"$TRAIN" $ARGS --ckpt-dir "$d/$name" --metrics "$d/$name.csv" "$@" \
		> "$d/$name.out" 2> "$d/$name.err"
	local rc=$?
	[ "$rc" = 0 ] || fail "$name: srun exited $rc: $(tail -n 5 "$d/$name.err")"
}
# losses NAME: "step loss" of every step from the metrics file
losses() { awk -F, 'NR > 1 { print $1, $2 }' "$d/$1.csv"; }

# In the second dp 2 run rank 1 does four times the work: rank 0 waits for
# its last bucket of gradients every step, a wait counted once
log "one process, then dp 2 on two nodes (twice, rank 1 slow the second time)"
run one 1 1
run dp2a 2 2 --dp 2 --grad-bucket-mb 0.02
SIGMA_TUNER_INJECT=slow:1:4 run dp2b 2 2 --dp 2 --grad-bucket-mb 0.02
grep '^step 20/20' "$d/one.out"
grep '^step 20/20' "$d/dp2a.out"

[ "$(grep -c '^step [0-9]*/20 ' "$d/dp2a.out")" = 20 ] ||
	fail "dp 2 printed $(grep -c '^step [0-9]*/20 ' "$d/dp2a.out") progress lines for 20 steps (only rank 0 prints)"
grep -q 'rank 1 of 2' "$d/dp2a.err" || fail "rank 1 did not report itself: $(cat "$d/dp2a.err")"
[ "$(losses one | wc -l)" = 20 ] || fail "one process: $(losses one | wc -l) metric rows"

log "losses: dp 2 against one process, within 1e-3 relative"
paste -d' ' <(losses one) <(losses dp2a) | awk '
	{ rel = ($2 - $4) / $2; if (rel < 0) rel = -rel; if (rel > worst) worst = rel }
	$1 != $3 || rel > 1e-3 { print "step " $1 ": one " $2 ", dp 2 " $4; bad = 1 }
	END { printf "largest relative difference %.2g\n", worst; exit bad }' ||
	fail "dp 2 losses differ from one process"
vone=$(grep 'val_ce' "$d/one.out" | tail -1 | awk '{print $4}')
vdp=$(grep 'val_ce' "$d/dp2a.out" | tail -1 | awk '{print $4}')
awk -v a="$vone" -v b="$vdp" 'BEGIN { d = a - b; exit !(d < 1e-3 && d > -1e-3) }' ||
	fail "validation ce: one process $vone, dp 2 $vdp"

log "weights after 20 steps: dp 2 against one process, within 1e-4"
ck=ckpt-00000020.h5
h5diff -d 1e-4 "$d/one/$ck" "$d/dp2a/$ck" /model /model >/dev/null ||
	fail "weights differ by more than 1e-4: $(h5diff -d 1e-4 "$d/one/$ck" "$d/dp2a/$ck" /model /model | tail -3)"

log "two dp 2 runs: the same bits"
cmp <(losses dp2a) <(losses dp2b) || fail "two dp 2 runs printed different losses"
for g in /model /optim/m /optim/v; do
	h5diff "$d/dp2a/$ck" "$d/dp2b/$ck" $g $g >/dev/null ||
		fail "two dp 2 runs: $g differs: $(h5diff "$d/dp2a/$ck" "$d/dp2b/$ck" $g $g | tail -3)"
done

log "step timing in the metrics (also of the run with rank 1 slow)"
for r in dp2a dp2b; do
	head -1 "$d/$r.csv" | grep -q ',step_ms,comm_ms' || fail "$r: metrics header: $(head -1 "$d/$r.csv")"
	awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
		!($c["comm_ms"] >= 0 && $c["step_ms"] >= $c["comm_ms"]) {
			print "step " $1 ": step_ms " $c["step_ms"] ", comm_ms " $c["comm_ms"]; bad = 1 }
		END { if (NR != 21) print NR - 1 " rows"; exit bad || NR != 21 }' "$d/$r.csv" >"$d/timing.bad" ||
		fail "$r: comm_ms must be within step_ms: $(cat "$d/timing.bad")"
done

log "a layout that cannot work is refused (exit 64, says why)"
timeout 60 srun --mpi=pmix -N2 -n2 "$TRAIN" $ARGS --dp 4 > "$d/bad.out" 2>&1
rc=$?
[ "$rc" = 64 ] || fail "--dp 4 on 2 ranks: exit $rc, want 64"
grep -q 'dp x pp must equal the number of tasks' "$d/bad.out" || fail "no reason given: $(cat "$d/bad.out")"
timeout 60 srun --mpi=pmix -N2 -n2 "$TRAIN" $ARGS --batch 7 > "$d/bad.out" 2>&1
rc=$?
[ "$rc" = 64 ] || fail "--batch 7 over dp 2: exit $rc, want 64"
grep -q 'cannot be split evenly over dp 2' "$d/bad.out" || fail "no reason given: $(cat "$d/bad.out")"
log "ok"
