#!/bin/bash
# A model that fits only in parts: --preset large (407 M parameters, 6.5 GB
# of weights, gradients and moments) on 4 ranks of this one machine. Kept
# whole on every rank (dp 4) it is refused before anything is allocated,
# exit 64 naming the figures; in parts (pp 2 x dp 2 x ep 2) each rank holds
# a quarter of the experts and half of the rest, and it trains.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
need_train

export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive SIGMA_COMM_TIMEOUT=300
d=$(workdir train-large)
"$TRAIN" prepare --train-out "$d/train.tok" --val-out "$d/val.tok" "$F/fortunes" >/dev/null ||
	fail "prepare failed"
ARGS="--train $d/train.tok --preset large --batch 4 --steps 2 --warmup 1
	--seed 3 --threads 1 --log-every 1"

log "dp 4: the whole model on every rank is refused"
timeout 120 srun --mpi=pmix -N2 -n4 "$TRAIN" $ARGS --dp 4 > "$d/dp4.out" 2>&1
rc=$?
[ "$rc" = 64 ] || fail "dp 4: exit $rc, want 64: $(tail -3 "$d/dp4.out")"
grep -q 'needs [0-9.]* MiB in the layout dp 4 x ep 1 x pp 1, more than the [0-9.]* MiB it may use' "$d/dp4.out" ||
	fail "dp 4: no figures in the refusal: $(cat "$d/dp4.out")"
grep -q 'step 1 ' "$d/dp4.out" && fail "dp 4: trained although refused"

log "pp 2 x dp 2 x ep 2: in parts, it trains"
timeout 600 srun --mpi=pmix --kill-on-bad-exit=1 -N2 -n4 "$TRAIN" $ARGS \
	--pp 2 --dp 2 --ep 2 --metrics "$d/parts.csv" > "$d/parts.out" 2> "$d/parts.err"
rc=$?
[ "$rc" = 0 ] || fail "pp 2 x dp 2 x ep 2: exit $rc: $(tail -5 "$d/parts.err")"
[ "$(awk -F, 'NR > 1' "$d/parts.csv" | wc -l)" = 2 ] ||
	fail "pp 2 x dp 2 x ep 2: $(awk -F, 'NR > 1' "$d/parts.csv" | wc -l) metric rows, want 2"
awk -F, 'NR > 1 && !($2 > 0 && $2 < 100) { exit 1 }' "$d/parts.csv" ||
	fail "pp 2 x dp 2 x ep 2: a loss out of range: $(cat "$d/parts.csv")"
need=$(sed -n 's/.*config: memory per rank 0: \([0-9.]*\) MiB.*/\1/p' "$d/parts.out")
whole=$(sed -n 's/.*rank 0 needs \([0-9.]*\) MiB.*/\1/p' "$d/dp4.out")
log "memory per rank: whole $whole MiB, in parts $need MiB"
awk -v a="$need" -v b="$whole" 'BEGIN { exit !(a > 0 && a * 3 < b) }' ||
	fail "in parts a rank needs $need MiB, whole $whole MiB: not a third"
log "ok"
