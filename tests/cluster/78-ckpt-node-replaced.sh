#!/bin/bash
# Tier 1 across a node lost in the middle of a replica exchange: 4 ranks
# on n1-n4 with node-local checkpoints every 3 steps (rank R's replica kept
# by rank R + 1 on the next node). The exchange of step 12 pauses halfway
# (SIGMA_REPLICA_INJECT), and rank 3's process on n4 is killed with
# SIGKILL inside that pause: rank 0 on n1 holds half of rank 3's step 12.
# The job ends, and n4's local directory is gone with the node. The job
# then runs again as attempt 1 (SIGMA_ATTEMPT=1) on n1, n2, n3 and the
# spare n5: the restore planner must take step 9, the newest step every
# shard of which survives whole (one save lost, the one in flight; none
# that was complete on both sides), rank 3's shard from the replica on n1
# moved to n5, and the run must end bitwise equal to an uninterrupted one.
# The replica used is itself bitwise the uninterrupted run's state at that
# step, and the new files carry the attempt in their names.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
. "$SIGMA_SRCDIR/tests/cluster/ckpt-lib.sh"

# CKPT_LAYOUT: another layout of the 4 ranks (86, 87: a model in parts)
ckpt_setup ckpt-node-replaced${CKPT_LAYOUT:+-parts}
spares_free
STEPS=40
ARGS="--train $d/train.tok --preset small --batch 8 --steps $STEPS
	--warmup 2 --seed 7 --threads 1 --log-every 1 ${CKPT_LAYOUT-} --eval-every 0
	--ckpt-every 3"

log "reference: 4 ranks on n1-n4, $STEPS steps, every tier-1 copy kept"
run4 ref n1,n2,n3,n4 0 --local-ckpt-dir "$d/local-ref" --local-ckpt-keep 100

log "the same run, rank 3 on n4 killed while it sends step 12's replica"
# shellcheck disable=SC2086
SIGMA_REPLICA_INJECT=12:20000 srun --mpi=pmix --kill-on-bad-exit=1 -N4 -n4 -w n1,n2,n3,n4 "$TRAIN" $ARGS \
	--ckpt-dir "$d/t" --local-ckpt-dir "$d/local" > "$d/t.out" 2> "$d/t.err" &
srun_pid=$!
until_true 60 grep -q 'rank 3: tier 1: step 12: the replica to rank 0 pauses' "$d/t.err" ||
	{ kill "$srun_pid"; fail "rank 3's exchange of step 12 did not pause: $(tail -n 5 "$d/t.err")"; }
pid=$(sed -n 's/.*rank 3 of 4 on n4, pid \([0-9]*\):.*/\1/p' "$d/t.err" | head -1)
[ -n "$pid" ] || { kill "$srun_pid"; fail "no pid of rank 3: $(head -n 8 "$d/t.err")"; }
kill -KILL "$pid"
until_true 90 bash -c "! kill -0 $srun_pid 2>/dev/null" ||
	{ kill "$srun_pid"; fail "the step did not end after rank 3 died"; }
wait "$srun_pid" && fail "the killed run exited 0"
killed_at=$(grep -c '^step [0-9]*/' "$d/t.out")
[ "$killed_at" -lt "$STEPS" ] || fail "the run ended before the kill"
grep -q "tier 1: step 12: the replica exchange (to rank 1, from rank 3) failed: the peer closed the connection" "$d/t.err" ||
	fail "rank 0 did not see rank 3's replica of step 12 cut: $(grep 'tier 1' "$d/t.err" | head -n 3)"
log "killed at about step $killed_at, mid-exchange; n4's copies lost with the node"
rm -rf "$d/local/n4"
# what the nodes hold now, for the comparison below (retention removes it)
cp -a "$d/local" "$d/local-after-kill"

log "attempt 1 on n1, n2, n3, n5"
SIGMA_ATTEMPT=1 run4 t n1,n2,n3,n5 0 --local-ckpt-dir "$d/local"
line=$(grep '^resume: ' "$d/t.out")
s=$(sed -n 's/^resume: tier 1, step \([0-9]*\) (attempt 0): 4 shards, 1 from a buddy.s replica, 1 moved to their rank (newest shared checkpoint: -1); \([0-9]*\) checkpointed steps lost; continuing at step \1$/\1/p' <<<"$line")
[ -n "$s" ] || fail "not a tier-1 resume with rank 3's shard moved from its replica: $line"
[ "$s" = 9 ] || fail "resumed at step $s, not 9 (the newest step whole on both sides): $line"
[ ! -e "$d/local-after-kill/n1/replica-3/$(printf 'ckpt-%08d.h5' 12)" ] ||
	fail "n1 kept a replica of rank 3's step 12, which never arrived whole"
log "$line"
same_state "$d/local-ref/n4/rank-3/$(printf 'ckpt-%08d.h5' "$s")" \
	"$d/local-after-kill/n1/replica-3/$(printf 'ckpt-%08d.h5' "$s")" ||
	fail "the replica of rank 3 at step $s differs from the uninterrupted run"
same_state "$d/ref/$(printf 'ckpt-%08d.h5' "$STEPS")" \
	"$d/t/$(printf 'ckpt-%08d-a1.h5' "$STEPS")" ||
	fail "step $STEPS differs from the uninterrupted run (or is not named for attempt 1: $(ls "$d/t"))"
old=$(ls "$d/local/n5/rank-3" | grep -v -- '-a1\.h5\(\.seal\)\{0,1\}$' | grep -vx run)
[ -z "$old" ] || fail "n5 holds files of attempt 0: $old"
log "resumed at step $s from tier 1, bitwise equal at step $STEPS, attempt 1 in the names"

# split moments: each tier-1 copy holds its rank's blocks alone, so a run
# that splits them otherwise must not take it (it would load zeros), even
# where tier 1 is the newest: the shared step 40 is put aside
case ${CKPT_LAYOUT-} in *--zero*)
	log "attempt 2 without --zero, the shared step $STEPS aside: not the copies of blocks"
	mkdir "$d/aside" && mv "$d/t"/ckpt-*-a1.h5* "$d/aside/"
	ARGS=${ARGS/--zero 1/} SIGMA_ATTEMPT=2 run4 t n1,n2,n3,n5 0 \
		--local-ckpt-dir "$d/local" --steps $((STEPS + 2))
	line=$(grep '^resume: ' "$d/t.out" | tail -n 1)
	case $line in
	"resume: tier 1"*) fail "a run without --zero took tier 1's blocks: $line" ;;
	*"tier 1: the layout changed"*) log "$line" ;;
	*) fail "not refused for its layout: $line" ;;
	esac ;;
esac
exit 0
