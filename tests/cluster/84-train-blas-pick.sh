#!/bin/bash
# sigma-train's BLAS kernel pick under srun --mpi=pmix on two nodes: each
# rank starts as if OpenBLAS had chosen its Prescott kernel (what it does
# on a CPU newer than it knows), executes itself again on the kernel this
# CPU allows before PMIx starts, and the job trains to the same losses,
# bit for bit, as a job started on that kernel; a user's OPENBLAS_CORETYPE
# is kept on every rank.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
need_train

export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive SIGMA_COMM_TIMEOUT=60
d=$(workdir train-blas)
"$TRAIN" prepare --train-out "$d/train.tok" --val-out "$d/val.tok" "$F/fortunes" >/dev/null ||
	fail "prepare failed"
best=$("$TRAIN" sgemm --size 64 --reps 1 | sed -n 's/.*best kernel \(.*\)$/\1/p')
[ -n "$best" ] || fail "sgemm did not name the best kernel"
[ "$best" != Prescott ] || skip "this CPU allows no kernel above Prescott"
ARGS="--train $d/train.tok --preset small --batch 8 --steps 8 --warmup 2
	--seed 3 --threads 1 --log-every 1 --dp 2"

# run NAME ENV...: a dp 2 job on two nodes with the environment given
run() {
	local name=$1
	shift
	timeout 120 env "$@" srun --mpi=pmix --kill-on-bad-exit=1 -N2 -n2 \
		"$TRAIN" $ARGS --metrics "$d/$name.csv" \
		> "$d/$name.out" 2> "$d/$name.err"
	local rc=$?
	[ "$rc" = 0 ] || fail "$name: srun exited $rc: $(tail -n 5 "$d/$name.err")"
}
losses() { awk -F, 'NR > 1 { print $1, $2, $3 }' "$d/$1.csv"; }

log "a job started on the $best kernel, and one corrected from Prescott"
run direct OPENBLAS_CORETYPE="$best"
run picked SIGMA_BLAS_PICK=as-if:Prescott
grep "BLAS kernel" "$d/picked.out"
grep -q "BLAS kernel $best for this CPU .*in place of the library's choice Prescott (verified)" "$d/picked.out" ||
	fail "the corrected job did not say so: $(grep BLAS "$d/picked.out")"
grep -q 'rank 1 of 2' "$d/picked.err" || fail "rank 1 did not join: $(cat "$d/picked.err")"
cmp <(losses direct) <(losses picked) ||
	fail "the corrected job's losses differ from the job on $best: $(paste -d' ' <(losses direct) <(losses picked) | head -3)"

log "a user's kernel is kept"
run user OPENBLAS_CORETYPE=Prescott
grep -q "BLAS kernel Prescott (OPENBLAS_CORETYPE=Prescott); this CPU .* allows $best" "$d/user.out" ||
	fail "the user's kernel was not kept: $(grep BLAS "$d/user.out")"
log "the kernel is picked on every rank before PMIx starts"
