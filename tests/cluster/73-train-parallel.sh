#!/bin/bash
# sigma-train's expert and pipeline parallelism under srun --mpi=pmix across
# nodes: for the same global batch and seed, every layout gives the losses
# of one process (within fp32 reordering) for 20 steps and the same
# weights: ep 2 (dp 2), pp 2, dp 2 x ep 2 (dp 4), pp 2 x dp 2, dp 4 and
# pp 2 x dp 2 x ep 2 with the AdamW moments split (--zero 1), and with
# micro-batches (1F1B) pp 2 x dp 2 x ep 2 against one process with the
# same micro-batches. A checkpoint of dp 2 x ep 2 restores into one process
# and into pp 2, one of dp 4 with split moments into pp 2 x dp 2, and all
# give the uninterrupted run's next-step loss.
# Layouts that cannot work are refused with exit 64 and a reason.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
need_train
command -v h5diff >/dev/null || skip "h5diff not installed"

export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive SIGMA_COMM_TIMEOUT=60
d=$(workdir train-parallel)
"$TRAIN" prepare --train-out "$d/train.tok" --val-out "$d/val.tok" "$F/fortunes" >/dev/null ||
	fail "prepare failed"
ARGS="--train $d/train.tok --val $d/val.tok --preset small --batch 8 --steps 20
	--warmup 2 --seed 5 --threads 1 --log-every 1 --eval-every 10 --eval-batches 2
	--ckpt-every 10"

# run NAME TASKS [FLAGS]: train into $d/NAME (checkpoint, metrics, output),
# one task per node
run() {
	local name=$1 tasks=$2
	shift 2
	timeout 180 srun --mpi=pmix --kill-on-bad-exit=1 -N"$tasks" -n"$tasks" \
		"$TRAIN" $ARGS --ckpt-dir "$d/$name" --metrics "$d/$name.csv" "$@" \
		> "$d/$name.out" 2> "$d/$name.err"
	local rc=$?
	[ "$rc" = 0 ] || [ "$rc" = 75 ] ||
		fail "$name: srun exited $rc: $(tail -n 5 "$d/$name.err")"
}
# losses NAME: "step loss" of every step from the metrics file
losses() { awk -F, 'NR > 1 { print $1, $2 }' "$d/$1.csv"; }
# same_losses A B: the losses of runs A and B agree within 1e-3 relative
same_losses() {
	[ "$(losses "$2" | wc -l)" = "$(losses "$1" | wc -l)" ] ||
		fail "$2: $(losses "$2" | wc -l) metric rows, $1 has $(losses "$1" | wc -l)"
	paste -d' ' <(losses "$1") <(losses "$2") | awk -v a="$1" -v b="$2" '
		{ rel = ($2 - $4) / $2; if (rel < 0) rel = -rel; if (rel > worst) worst = rel }
		$1 != $3 || rel > 1e-3 { print "step " $1 ": " a " " $2 ", " b " " $4; bad = 1 }
		END { printf "%s against %s: largest relative loss difference %.2g\n", b, a, worst; exit bad }' ||
		fail "$2: losses differ from $1"
}
# same_weights A B: the step-20 weights agree within 1e-4
same_weights() {
	local ck=ckpt-00000020.h5
	h5diff -d 1e-4 "$d/$1/$ck" "$d/$2/$ck" /model /model >/dev/null ||
		fail "$2: weights differ from $1 by more than 1e-4: $(h5diff -d 1e-4 "$d/$1/$ck" "$d/$2/$ck" /model /model | tail -3)"
}
# val NAME: the last validation cross-entropy
val() { grep 'val_ce' "$d/$1.out" | tail -1 | awk '{print $4}'; }

log "one process"
run one 1
[ "$(losses one | wc -l)" = 20 ] || fail "one process: $(losses one | wc -l) metric rows"
for layout in "ep2 2 --dp 2 --ep 2" "pp2 2 --pp 2" "dp2ep2 4 --dp 4 --ep 2" \
	"pp2dp2 4 --pp 2 --dp 2" "dp4z 4 --dp 4 --zero 1" \
	"pp2dp2ep2z 4 --pp 2 --dp 2 --ep 2 --zero 1"; do
	set -- $layout
	name=$1
	log "$name: ${*:3}"
	run "$@"
	grep -q "dp [0-9]* ep [0-9]* pp [0-9]* micro 1, stage" "$d/$name.err" ||
		fail "$name: no rank line: $(head -3 "$d/$name.err")"
	same_losses one "$name"
	same_weights one "$name"
	awk -v a="$(val one)" -v b="$(val "$name")" 'BEGIN { d = a - b; exit !(d < 1e-3 && d > -1e-3) }' ||
		fail "$name: validation ce $(val "$name"), one process $(val one)"
done
# split moments: a rank of dp 4 holds a quarter of them, and the step-20
# checkpoint holds them whole, as one process's
grep -q 'holds [0-9]* parameters and the moments of [0-9]* ' "$d/dp4z.err" ||
	fail "dp4z: no summary line: $(tail -3 "$d/dp4z.err")"
sed -nE 's/.*holds ([0-9]+) parameters and the moments of ([0-9]+) .*/\1 \2/p' "$d/dp4z.err" |
	awk '{ if ($2 * 4 > $1 + 4 || $2 * 4 < $1 - 4) bad = 1 } END { exit bad }' ||
	fail "dp4z: the moments are not split in 4: $(grep holds "$d/dp4z.err")"
h5diff -d 1e-4 "$d/one/ckpt-00000020.h5" "$d/dp4z/ckpt-00000020.h5" /optim /optim >/dev/null ||
	fail "dp4z: its checkpoint's moments differ from one process's"
# the expert placement is in the checkpoint: contiguous halves of the 4
# experts of each of the 2 layers on ep ranks 0 and 1
h5dump -d /experts/owner -y -w 0 "$d/dp2ep2/ckpt-00000020.h5" | tr -d ' \n' |
	grep -q 'DATA{0,0,1,1,0,0,1,1}' ||
	fail "dp2ep2: no placement table in its checkpoint: $(h5dump -d /experts/owner "$d/dp2ep2/ckpt-00000020.h5" 2>&1 | tail -5)"
grep -q 'stage 1 (layers 1-1)' "$d/pp2.err" || fail "pp 2: the second stage does not hold layer 1: $(cat "$d/pp2.err")"

log "micro-batches on the 1F1B schedule: pp 2 x dp 2 x ep 2 against one process, 4 micro-batches"
run onem 1 --micro 4 --batch 16
run pp2dp2ep2m 4 --pp 2 --dp 2 --ep 2 --micro 4 --batch 16
# micro-batch i of every data-parallel rank together is the i-th quarter of
# the batch, as with one process: 4 sequences, 2 on each of the dp 2 ranks
same_losses onem pp2dp2ep2m
same_weights onem pp2dp2ep2m
if cmp -s <(losses one) <(losses onem); then
	fail "a batch of 16 in 4 micro-batches trained exactly like a batch of 8"
fi

log "a checkpoint of dp 2 x ep 2 restores into one process and into pp 2"
mkdir -p "$d/r1" "$d/rpp" "$d/rz"
# a checkpoint in parts: the index and its shards, with their seals
cp "$d/dp2ep2/"ckpt-00000010.h5* "$d/dp2ep2/"shard-00000010-* "$d/r1/"
cp "$d/dp2ep2/"ckpt-00000010.h5* "$d/dp2ep2/"shard-00000010-* "$d/rpp/"
run r1 1 --resume --stop-at 11
run rpp 2 --pp 2 --resume --stop-at 11
cp "$d/dp4z/"ckpt-00000010.h5* "$d/dp4z/"shard-00000010-* "$d/rz/"
run rz 4 --pp 2 --dp 2 --resume --stop-at 11
for r in r1 rpp rz; do
	grep -q 'resume: .*ckpt-00000010.h5, continuing at step 10' "$d/$r.out" ||
		fail "$r: did not resume from step 10: $(grep resume "$d/$r.out")"
	[ "$(losses "$r" | head -1 | cut -d' ' -f1)" = 11 ] ||
		fail "$r: first step after the resume is $(losses "$r" | head -1)"
	awk -v a="$(losses one | sed -n 11p | cut -d' ' -f2)" -v b="$(losses "$r" | head -1 | cut -d' ' -f2)" \
		'BEGIN { r = (a - b) / a; exit !(r < 1e-3 && r > -1e-3) }' ||
		fail "$r: step 11 loss $(losses "$r" | head -1), uninterrupted $(losses one | sed -n 11p)"
done
log "step 11: uninterrupted $(losses one | sed -n 11p | cut -d' ' -f2), one process $(losses r1 | head -1 | cut -d' ' -f2), pp 2 $(losses rpp | head -1 | cut -d' ' -f2), pp 2 x dp 2 from split moments $(losses rz | head -1 | cut -d' ' -f2)"

log "layouts that cannot work are refused (exit 64, with the reason)"
refused() {
	local want=$1 tasks=$2
	shift 2
	timeout 60 srun --mpi=pmix -N"$tasks" -n"$tasks" "$TRAIN" $ARGS "$@" > "$d/bad.out" 2>&1
	local rc=$?
	[ "$rc" = 64 ] || fail "$*: exit $rc, want 64"
	grep -q "$want" "$d/bad.out" || fail "$*: no reason given: $(cat "$d/bad.out")"
}
refused 'ep 4 does not divide dp 2' 2 --dp 2 --ep 4
refused 'every stage needs at least one layer' 4 --pp 4
refused 'cannot be cut into 3 equal micro-batches' 2 --dp 2 --micro 3
log "ok"
