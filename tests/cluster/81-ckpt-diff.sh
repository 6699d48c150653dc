#!/bin/bash
# Differential checkpoints under Slurm: a dp 2 run on two nodes with a full
# checkpoint every 8 steps and a differential every 2 loses its newest full
# checkpoint (the stop's, as if the job had been killed before it); the
# next run (--resume, as a requeued attempt does) resumes on dp 2 from the
# newest differential, read by rank 0 with its base and broadcast to rank
# 1, and ends with weights and both moments bitwise those of an
# uninterrupted run.
# A damaged newest differential is refused and the one before used.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
need_train
command -v h5diff >/dev/null || skip "h5diff not installed"

export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive SIGMA_COMM_TIMEOUT=60
d=$(workdir ckpt-diff)
"$TRAIN" prepare --train-out "$d/train.tok" --val-out "$d/val.tok" "$F/fortunes" >/dev/null ||
	fail "prepare failed"
ARGS="--train $d/train.tok --preset small --batch 8 --steps 20 --warmup 2
	--seed 7 --threads 1 --log-every 1 --eval-every 0 --dp 2"

# same NAME: its final checkpoint equals the reference's, bitwise
same() {
	local f
	f=$(ls "$d/$1"/ckpt-00000020*.h5 | tail -n 1)
	[ -f "$f" ] || fail "$1: no checkpoint of step 20"
	for g in /model /optim/m /optim/v; do
		h5diff "$d/ref/ckpt-00000020.h5" "$f" $g $g >/dev/null ||
			fail "$1: $g at step 20 differs from the uninterrupted run"
	done
}

log "reference: dp 2, 20 steps without a stop"
train_dp2 ref 0
log "full every 8, a differential every 2, stopped after step 13"
train_dp2 diff 75 --ckpt-every 8 --ckpt-diff-every 2 --stop-at 13
for f in ckpt-00000008.h5 diff-00000010-base-00000008.h5 diff-00000012-base-00000008.h5 ckpt-00000013.h5; do
	[ -f "$d/diff/$f" ] || fail "no $f: $(ls "$d/diff")"
done
# the stop's full checkpoint lost: the newest is the differential of 12
rm "$d/diff/ckpt-00000013.h5"
cp -r "$d/diff" "$d/damaged"

log "resumed on dp 2 from the differential of step 12"
train_dp2 diff 0 --ckpt-every 8 --ckpt-diff-every 2 --resume
grep -q 'diff-00000012-base-00000008.h5' "$d/diff.out" || fail "did not name the differential: $(grep resume "$d/diff.out")"
grep -q 'continuing at step 12' "$d/diff.out" || fail "did not continue at step 12: $(grep resume "$d/diff.out")"
same diff

log "the newest differential damaged: the one of step 10"
f=$d/damaged/diff-00000012-base-00000008.h5
s=$(stat -c %s "$f")
for at in 3 5 7; do
	printf '\377\377\377\377' | dd of="$f" bs=1 seek=$((s * at / 10)) conv=notrunc 2>/dev/null
done
train_dp2 damaged 0 --ckpt-every 8 --ckpt-diff-every 2 --resume
grep -q 'refused.*diff-00000012-base-00000008.h5' "$d/damaged.err" ||
	fail "the damaged differential was not refused: $(grep -i refused "$d/damaged.err")"
grep -q 'continuing at step 10' "$d/damaged.out" || fail "did not continue at step 10: $(grep resume "$d/damaged.out")"
same damaged
# the damaged differential of step 12 was superseded by the full
# checkpoint the resumed run wrote at 12 (no base in memory after
# resuming from a differential), and pruned; the one of 14 is against it
[ -f "$d/damaged/ckpt-00000012.h5" ] && [ -f "$d/damaged/diff-00000014-base-00000012.h5" ] &&
	[ ! -e "$d/damaged/diff-00000012-base-00000008.h5" ] ||
	fail "after resuming from a differential: $(ls "$d/damaged")"
log "ok"
