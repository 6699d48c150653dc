#!/bin/bash
# Checkpoints across layouts: a dp 2 run stopped at step 10 (exit 75, as on
# SIGUSR1) and resumed on dp 2 continues bitwise identically to an
# uninterrupted dp 2 run; its checkpoint resumed by one process, and a
# one-process checkpoint resumed on dp 2, give the uninterrupted run's
# losses within fp32 reordering tolerance. The checkpoint holds whole
# canonical tensors whatever the layout that wrote it.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
need_train
command -v h5diff >/dev/null || skip "h5diff not installed"

export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive SIGMA_COMM_TIMEOUT=60
d=$(workdir train-dp-resume)
"$TRAIN" prepare --train-out "$d/train.tok" --val-out "$d/val.tok" "$F/fortunes" >/dev/null ||
	fail "prepare failed"
ARGS="--train $d/train.tok --preset small --batch 8 --steps 20 --warmup 2
	--seed 7 --threads 1 --log-every 1 --eval-every 0"

# run NAME TASKS WANT_RC [FLAGS]: train with checkpoints in $d/NAME
run() {
	local name=$1 tasks=$2 want=$3
	shift 3
	timeout 120 srun --mpi=pmix --kill-on-bad-exit=1 -N"$tasks" -n"$tasks" \
		"$TRAIN" $ARGS --ckpt-dir "$d/$name" --dp "$tasks" "$@" \
		>> "$d/$name.out" 2>> "$d/$name.err"
	local rc=$?
	[ "$rc" = "$want" ] || fail "$name: srun exited $rc, want $want: $(tail -n 5 "$d/$name.err")"
}
# losses NAME FROM: "step loss" of the steps after FROM
losses() { awk -v f="$2" '$1 == "step" && $2 ~ /\/20$/ { split($2, s, "/"); if (s[1] > f) print s[1], $4 }' "$d/$1.out"; }
# close NAME NAME: the same steps, losses within 1e-3 relative
close() {
	paste -d' ' <(losses "$1" 10) <(losses "$2" 10) | awk '
		{ rel = ($2 - $4) / $2; if (rel < 0) rel = -rel }
		$1 != $3 || rel > 1e-3 || NF != 4 { print; bad = 1 }
		END { exit bad || NR != 10 }'
}
ck10=ckpt-00000010.h5
ck20=ckpt-00000020.h5

log "reference: dp 2, 20 steps without a stop"
run ref 2 0
log "dp 2 stopped after step 10 (exit 75), resumed on dp 2"
run same 2 75 --stop-at 10
grep -q 'stopped by --stop-at at step 10 after a checkpoint' "$d/same.out" || fail "no stop message"
[ -f "$d/same/$ck10" ] || fail "no checkpoint $ck10"
run same 2 0 --resume
grep -q 'continuing at step 10' "$d/same.out" || fail "did not resume at step 10"
cmp <(losses ref 10) <(losses same 10) || fail "dp 2 resumed on dp 2: losses differ from the uninterrupted run"
for g in /model /optim/m /optim/v; do
	h5diff "$d/ref/$ck20" "$d/same/$ck20" $g $g >/dev/null ||
		fail "dp 2 resumed on dp 2: $g at step 20 differs from the uninterrupted run"
done

log "the dp 2 checkpoint holds whole tensors: h5dump sees [E, D, F] experts"
h5dump -H -d /model/layers.0.w1 "$d/same/$ck10" | grep -q 'DATASPACE  SIMPLE { ( 4, 64, 128 )' ||
	fail "layers.0.w1 of the dp 2 checkpoint: $(h5dump -H -d /model/layers.0.w1 "$d/same/$ck10" | grep DATASPACE), want E 4 x D 64 x F 128"

log "dp 2 checkpoint resumed by one process"
mkdir -p "$d/to1" && cp "$d/same/$ck10" "$d/same/$ck10.seal" "$d/to1/"
run to1 1 0 --resume
grep -q 'continuing at step 10' "$d/to1.out" || fail "one process did not resume at step 10"
close ref to1 || fail "one process resumed from dp 2: losses differ from dp 2"

log "one-process checkpoint resumed on dp 2"
run from1 1 75 --stop-at 10
run from1 2 0 --resume
grep -q 'continuing at step 10' "$d/from1.out" || fail "dp 2 did not resume at step 10"
close ref from1 || fail "dp 2 resumed from one process: losses differ"
h5diff -d 1e-4 "$d/ref/$ck20" "$d/from1/$ck20" /model /model >/dev/null ||
	fail "dp 2 resumed from one process: weights at step 20 differ by more than 1e-4"
log "SIGUSR1 to rank 1 only: both ranks stop after the same step, exit 75, and resume"
sig=$d/sig
srun --mpi=pmix --kill-on-bad-exit=1 -N2 -n2 "$TRAIN" $ARGS --steps 100000 --log-every 10 \
	--dp 2 --ckpt-dir "$sig" > "$sig.out" 2> "$sig.err" &
srun_pid=$!
until_true 60 grep -q '^step 20/' "$sig.out" || { kill "$srun_pid"; fail "training did not start: $(tail -n 3 "$sig.err")"; }
pid=$(sed -n 's/.*rank 1 of 2 on [^,]*, pid \([0-9]*\):.*/\1/p' "$sig.err" | head -1)
[ -n "$pid" ] || { kill "$srun_pid"; fail "no pid of rank 1"; }
kill -USR1 "$pid"
until_true 60 bash -c "! kill -0 $srun_pid 2>/dev/null" || { kill "$srun_pid"; fail "the run did not stop after SIGUSR1"; }
wait "$srun_pid"
rc=$?
grep 'stopped by' "$sig.out"
[ "$rc" = 75 ] || fail "srun exited $rc after SIGUSR1 to rank 1, want 75: $(tail -n 3 "$sig.err")"
at=$(sed -n 's/^stopped by a signal to another rank at step \([0-9]*\) after a checkpoint.*/\1/p' "$sig.out")
[ -n "$at" ] || fail "rank 0 did not stop for rank 1's signal"
[ -f "$sig/$(printf 'ckpt-%08d.h5' "$at")" ] || fail "no checkpoint of step $at"
srun --mpi=pmix --kill-on-bad-exit=1 -N2 -n2 "$TRAIN" $ARGS --steps 100000 --log-every 10 \
	--dp 2 --ckpt-dir "$sig" --resume --stop-at $((at + 5)) >> "$sig.out" 2>> "$sig.err"
rc=$?
[ "$rc" = 75 ] || fail "resume after SIGUSR1: exit $rc, want 75 (--stop-at)"
grep -q "continuing at step $at\$" "$sig.out" || fail "did not resume at step $at"
log "ok"
