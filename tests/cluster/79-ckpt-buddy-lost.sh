#!/bin/bash
# A node and its buddy both lost: 4 ranks on n1-n4, node-local copies
# every 3 steps (rank R's replica on the next node), shared checkpoints
# every 8, stopped after step 10; the shared step 10 is then lost too.
# n1 (rank 0's own copy) and n2 (its replica) are gone: no copy of shard 0
# survives in tier 1, so the run on n3, n4, n5, n6 must say so and restore
# from the shared step 8, and end bitwise equal to an uninterrupted run.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
. "$SIGMA_SRCDIR/tests/cluster/ckpt-lib.sh"

# CKPT_LAYOUT: another layout of the 4 ranks (86, 87: a model in parts)
ckpt_setup ckpt-buddy-lost${CKPT_LAYOUT:+-parts}
spares_free
ARGS="--train $d/train.tok --preset small --batch 8 --steps 20 --warmup 2
	--seed 7 --threads 1 --log-every 1 ${CKPT_LAYOUT-} --eval-every 0"
TIERS="--local-ckpt-dir $d/local --ckpt-every 3 --ckpt-full-every 8"

log "reference: 4 ranks on n1-n4, 20 steps"
run4 ref n1,n2,n3,n4 0
log "tiers, stopped after step 10"
# shellcheck disable=SC2086
run4 t n1,n2,n3,n4 75 $TIERS --stop-at 10
for n in n1 n2 n3 n4; do
	[ "$(ls "$d/local/$n"/*/ckpt-00000009.h5 | wc -l)" = 2 ] ||
		fail "$n: no own copy and replica of step 9: $(ls -R "$d/local/$n")"
done
[ -f "$d/t/ckpt-00000008.h5" ] || fail "no shared step 8: $(ls "$d/t")"
log "n1 and n2 lost (rank 0's copy and its replica), and the shared step 10"
rm -rf "$d/local/n1" "$d/local/n2" "$d/t/ckpt-00000010.h5"
# shellcheck disable=SC2086
run4 t n3,n4,n5,n6 0 $TIERS --resume
want="resume: tier 2, $d/t/ckpt-00000008.h5 (tier 1: newest step 9 (attempt 0) has no valid copy of shard 0 (3 of 4 shards)); 1 checkpointed steps lost; continuing at step 8"
grep -qxF "$want" "$d/t.out" || fail "not the tier-2 resume: $(grep resume "$d/t.out")"
log "$want"
same_state "$d/ref/ckpt-00000020.h5" "$d/t/ckpt-00000020.h5" ||
	fail "step 20 differs from the uninterrupted run"
log "restored from tier 2 at step 8, bitwise equal at step 20"
exit 0
