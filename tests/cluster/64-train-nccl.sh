#!/bin/bash
# sigma-train --device cuda on several ranks, its tensors through NCCL (the
# unique id through PMIx). With G >= 2 GPUs on this machine, G ranks on one
# node (one GPU each) train 20 steps in fp32 as dp 2, ep 2 and pp 2, and
# with 4 GPUs pp 2 x dp 2 x ep 2 on 4 micro-batches; each gives the losses
# of one CPU process (1e-2 relative: other summation orders) and the
# checkpoint it writes restores on the CPU with the next step's loss.
# Without a GPU, a job of 2 ranks on --device cuda is refused with exit 64
# and a reason on every rank, and the test is skipped.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
need_train

export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive SIGMA_COMM_TIMEOUT=120
d=$(workdir train-nccl)
"$TRAIN" prepare --train-out "$d/train.tok" --val-out "$d/val.tok" "$F/fortunes" >/dev/null ||
	fail "prepare failed"
ARGS="--train $d/train.tok --preset small --batch 8 --steps 20 --warmup 2
	--seed 5 --threads 1 --log-every 1 --eval-every 0 --ckpt-every 10"

ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ "${ngpu:-0}" = 0 ]; then
	srun --mpi=pmix -N1 -n2 "$TRAIN" $ARGS --device cuda --dp 2 \
		--ckpt-dir "$d/refused" > "$d/refused.out" 2> "$d/refused.err"
	rc=$?
	[ "$rc" = 64 ] || fail "--device cuda without a GPU: srun exited $rc, want 64: $(tail -n 5 "$d/refused.err")"
	[ "$(grep -c -- '--device: .*\(no CUDA device\|CUDA path\|not built\)' "$d/refused.err")" = 2 ] ||
		fail "--device cuda without a GPU: not refused with a reason on both ranks: $(cat "$d/refused.err")"
	skip "no GPU here: only the refusal was checked"
fi
[ "$ngpu" -ge 2 ] || skip "$ngpu GPU: NCCL needs one GPU per rank, and this test 2 ranks"
grep -q '^#define HAVE_NCCL 1' "$SIGMA_BUILDDIR/config.h" || skip "built without NCCL"

# run NAME TASKS [FLAGS]: TASKS ranks on n1 (one GPU each), metrics and
# checkpoints in $d/NAME
run() {
	local name=$1 tasks=$2 rc
	shift 2
	timeout 300 srun --mpi=pmix --kill-on-bad-exit=1 -N1 -n"$tasks" -w n1 \
		"$TRAIN" $ARGS --ckpt-dir "$d/$name" --metrics "$d/$name.csv" "$@" \
		> "$d/$name.out" 2> "$d/$name.err"
	rc=$?
	[ "$rc" = 0 ] || fail "$name: srun exited $rc: $(tail -n 5 "$d/$name.err")"
}
losses() { awk -F, 'NR > 1 { print $1, $2 }' "$d/$1.csv"; }
# close A B TOL: every step's loss of B within TOL relative of A's
close() {
	paste -d' ' <(losses "$1") <(losses "$2") | awk -v tol="$3" -v a="$1" -v b="$2" '
		{ if ($1 != $3) { print "step " $1 " against " $3; bad = 1 }
		  r = ($2 - $4) / $2; if (r < 0) r = -r; if (r > worst) worst = r; n++ }
		END { printf "%s against %s: %d steps, largest relative loss difference %.2e (tol %s)\n", b, a, n, worst, tol
		      exit bad || n != 20 || worst > tol }' ||
		fail "$2: losses differ from $1"
}

log "$ngpu GPUs: the CPU reference"
run cpu 1 --device cpu
run cpu4 1 --device cpu --micro 4 --batch 16
layouts=("dp2 2 --dp 2" "ep2 2 --dp 2 --ep 2" "pp2 2 --pp 2")
[ "$ngpu" -ge 4 ] && layouts+=("pp2dp2ep2 4 --pp 2 --dp 2 --ep 2 --micro 4 --batch 16")
for layout in "${layouts[@]}"; do
	set -- $layout
	name=$1
	log "$name on $2 GPUs: ${*:3}"
	run "$name" "$2" --device cuda:fp32 "${@:3}"
	grep -q 'cuda: ' "$d/$name.out" "$d/$name.err" || fail "$name: did not run on the CUDA kernels"
	ref=cpu
	[ "$name" = pp2dp2ep2 ] && ref=cpu4
	close "$ref" "$name" 1e-2
done

log "the dp 2 GPU checkpoint of step 10 restores on the CPU"
mkdir -p "$d/back"
cp "$d/dp2/ckpt-00000010.h5" "$d/dp2/ckpt-00000010.h5.seal" "$d/back/" || fail "dp2 wrote no step-10 checkpoint: $(ls "$d/dp2")"
run back 1 --device cpu --resume --stop-at 11
grep -q 'resume: .*ckpt-00000010.h5, continuing at step 10' "$d/back.out" ||
	fail "back: did not resume from step 10: $(grep resume "$d/back.out")"
awk -v a="$(losses cpu | sed -n 11p | cut -d' ' -f2)" -v b="$(losses back | head -1 | cut -d' ' -f2)" \
	'BEGIN { r = (a - b) / a; exit !(r < 1e-2 && r > -1e-2) }' ||
	fail "back: step 11 loss $(losses back | head -1), CPU run $(losses cpu | sed -n 11p)"
log "ok"
