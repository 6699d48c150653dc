#!/bin/bash
# Checkpoint tiers: a dp 2 run on two nodes with a node-local tier every 3
# steps (replicated to the buddy rank on the other node) and a shared one
# every 8 stops after step 10. Then one node's local copies are lost and
# the shared checkpoint of step 10: the resumed run must pick tier 1 at
# step 9, rank 0's shard from the replica the surviving node keeps (moved
# to rank 0), and end bitwise equal to an uninterrupted run. Retention:
# the node-local tier keeps the newest 2 (--local-ckpt-keep default).
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
need_train
command -v h5diff >/dev/null || skip "h5diff not installed"

export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive SIGMA_COMM_TIMEOUT=60
d=$(workdir ckpt-tiers)
"$TRAIN" prepare --train-out "$d/train.tok" --val-out "$d/val.tok" "$F/fortunes" >/dev/null ||
	fail "prepare failed"
ARGS="--train $d/train.tok --preset small --batch 8 --steps 20 --warmup 2
	--seed 7 --threads 1 --log-every 1 --eval-every 0 --dp 2"
TIERS="--local-ckpt-dir $d/local --ckpt-every 3 --ckpt-full-every 8"


log "reference: dp 2, 20 steps"
train_dp2 ref 0
log "tiers: stopped after step 10"
# shellcheck disable=SC2086
train_dp2 t 75 $TIERS --stop-at 10
for n in n1 n2; do
	for s in 6 9; do
		[ "$(ls "$d/local/$n"/*/ckpt-0000000$s.h5 | wc -l)" = 2 ] ||
			fail "no tier-1 step $s on $n: $(find "$d/local" -type f)"
	done
	ls "$d/local/$n"/*/ckpt-00000003.h5 >/dev/null 2>&1 &&
		fail "step 3 kept on $n beyond --local-ckpt-keep 2"
	[ "$(ls -d "$d/local/$n"/* | wc -l)" = 2 ] ||
		fail "$n: want its rank's copy and a replica: $(ls "$d/local/$n")"
done
[ -f "$d/t/ckpt-00000008.h5" ] || fail "no shared checkpoint of step 8"
[ -e "$d/t/ckpt-00000006.h5" ] && fail "a shared checkpoint at a tier-1 step"

log "lose rank 0's node's local copies and the shared step 10"
lost=$(dirname "$(ls -d "$d"/local/*/rank-0)")
rm -rf "$lost" "$d/t/ckpt-00000010.h5"
[ -d "$(ls -d "$d"/local/*/replica-0)" ] || fail "no replica of rank 0 left"
train_dp2 t 0 $TIERS --resume
grep -q "resume: tier 1, step 9 (attempt 0): 2 shards, 1 from a buddy's replica, 1 moved to their rank (newest shared checkpoint: 8); 0 checkpointed steps lost" "$d/t.out" ||
	fail "did not resume from the replica at step 9: $(grep resume "$d/t.out")"
for g in /model /optim/m /optim/v; do
	h5diff "$d/ref/ckpt-00000020.h5" "$d/t/ckpt-00000020.h5" $g $g >/dev/null ||
		fail "$g differs from the uninterrupted run"
done
log "resumed from the buddy's replica at step 9, bitwise equal at step 20"
exit 0
