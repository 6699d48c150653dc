#!/bin/bash
# A checkpoint directory on a small file system that fills up: a tmpfs of
# 8 MiB holds two checkpoints of the small model (3.2 MiB each) but not a
# third. The write of step 12 fails; the run must stop with exit 73 naming
# ENOSPC and the step, leave no temporary file, and keep steps 4 and 8
# intact (bitwise the uninterrupted run's). Once the file system is
# larger, a resume continues from step 8 and ends bitwise equal.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
TRAIN=$SIGMA_BUILDDIR/trainer/sigma-train
F=/usr/share/games/fortunes
[ -x "$TRAIN" ] || skip "sigma-train not built"
[ -r "$F/fortunes" ] || skip "fortunes-min not installed"
grep -q '^#define HAVE_PMIX 1' "$SIGMA_BUILDDIR/config.h" || skip "built without PMIx"
command -v h5diff >/dev/null || skip "h5diff not installed"
[ "$(id -u)" = 0 ] || skip "mounting a tmpfs needs root"

export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
d=$(workdir ckpt-full-disk)
"$TRAIN" prepare --train-out "$d/train.tok" --val-out "$d/val.tok" "$F/fortunes" >/dev/null ||
	fail "prepare failed"
mkdir -p "$d/ck"
mount -t tmpfs -o size=8m,mode=755 sigma-test-full "$d/ck" || skip "cannot mount a tmpfs"
trap 'umount "$d/ck" 2>/dev/null' EXIT
ARGS="--train $d/train.tok --preset small --batch 8 --steps 16 --warmup 2
	--seed 7 --threads 1 --log-every 1 --eval-every 0 --ckpt-every 4
	--ckpt-keep 5"

# run NAME DIR WANT_RC [FLAGS]: one process on n1
run() {
	local name=$1 dir=$2 want=$3
	shift 3
	# shellcheck disable=SC2086
	timeout 120 srun --mpi=pmix -N1 -n1 -w n1 "$TRAIN" $ARGS \
		--ckpt-dir "$dir" "$@" >> "$d/$name.out" 2>> "$d/$name.err"
	local rc=$?
	[ "$rc" = "$want" ] || fail "$name: srun exited $rc, want $want: $(tail -n 5 "$d/$name.err")"
}

log "reference: 16 steps"
run ref "$d/ref" 0
log "16 steps into a tmpfs of 8 MiB"
run t "$d/ck" 73
grep -q "checkpoint step 12: all 3 attempts failed: .*no space left on device (ENOSPC) for the checkpoint of step 12 .*the checkpoints already there are untouched" "$d/t.err" ||
	fail "no clear ENOSPC error: $(grep -i -m 3 'checkpoint' "$d/t.err")"
grep -q "checkpoint failed: " "$d/t.err" || fail "the stop does not say why: $(tail -n 3 "$d/t.err")"
left=$(ls -A "$d/ck" | grep -v '^ckpt-0000000[48]\.h5\(\.seal\)\{0,1\}$' | grep -vx run)
[ -z "$left" ] || fail "files besides steps 4 and 8 and the run manifest: $left"
for s in 4 8; do
	for g in /model /optim/m /optim/v; do
		h5diff "$d/ref/ckpt-0000000$s.h5" "$d/ck/ckpt-0000000$s.h5" $g $g >/dev/null ||
			fail "step $s: $g differs from the uninterrupted run"
	done
done
log "ENOSPC reported, no temporary file, steps 4 and 8 intact"

mount -o remount,size=32m "$d/ck" || fail "cannot grow the tmpfs"
run t "$d/ck" 0 --resume
grep -q "^resume: $d/ck/ckpt-00000008.h5, continuing at step 8$" "$d/t.out" ||
	fail "did not resume at step 8: $(grep resume "$d/t.out")"
for g in /model /optim/m /optim/v; do
	h5diff "$d/ref/ckpt-00000016.h5" "$d/ck/ckpt-00000016.h5" $g $g >/dev/null ||
		fail "$g differs from the uninterrupted run at step 16"
done
log "resumed from step 8 once there was room, bitwise equal at step 16"
exit 0
