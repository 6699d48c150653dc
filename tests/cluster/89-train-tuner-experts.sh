#!/bin/bash
# The auto-tuner's expert placement (docs/tuner.md) on 4 ranks that form
# one expert group (--ep 4), under srun:
#   1. with rank 3 made 2x slower, the tuner moves experts between the ep
#      ranks (each swap printed), weighing rank 3's pace once it is found
#      slow, and the run goes on;
#   2. replaying that run's decisions, its shares and its expert moves,
#      keeps the loss within 1e-6 relative of an uninjected run at every
#      step;
#   3. a replaying run stopped after the first move and resumed is
#      bitwise the uninterrupted replay, whether it resumes from the
#      shared tier (read by expert: the experts move to the checkpoint's
#      placement) or from the node-local tier (the slots hold it as
#      written: only the tables follow).
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
need_train

export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
d=$(workdir train-tuner-experts)
train_corpus
# 8 experts: two on each ep rank, so that a rank's pair can be rebalanced
ARGS="--train $d/train.tok --preset small --experts 8 --batch 32 --seq-len 32
	--warmup 5 --eval-every 0 --threads 1 --seed 5 --ep 4 --steps 80"
# on the same two nodes every time: tier 1 is theirs
train() { timeout 300 srun --mpi=pmix --kill-on-bad-exit=1 -N2 -n4 -w n1,n2 "$TRAIN" $ARGS "$@"; }

# 1. the experts move
SIGMA_TUNER_INJECT=slow:3:2 train --log-every 10 --tuner on \
	> "$d/slow.out" 2>&1 || fail "slow rank: exit $?: $(tail -3 "$d/slow.out")"
line=$(grep -m1 '^tuner: step [0-9]*: experts [0-9:,-]* (' "$d/slow.out") ||
	fail "the experts did not move: $(grep '^step\|^tuner' "$d/slow.out")"
at=$(sed 's/^tuner: step \([0-9]*\):.*/\1/' <<<"$line")
[ "$at" -ge 20 ] || fail "experts moved at step $at, before a window of steps counted them"
[ "$at" -le 60 ] || fail "experts moved only at step $at"
# and once rank 3 is found slow, a move weighs its pace
grep -q '^tuner: step [0-9]*: experts .*slowest ep rank 3 at [1-9]' "$d/slow.out" ||
	fail "no move weighed slow rank 3: $(grep '^tuner' "$d/slow.out")"
log "slow rank 3: $line; $(grep -m1 'experts .*slowest ep rank 3' "$d/slow.out")"

# 2. the loss with the run's decisions replayed
grep '^tuner: step [0-9]*: \(shares\|experts\) ' "$d/slow.out" > "$d/plan"
train --log-every 1 --metrics "$d/even.csv" > "$d/even.out" 2>&1 || fail "even: exit $?"
train --log-every 1 --ckpt-every 10 --ckpt-dir "$d/replay" --metrics "$d/replay.csv" \
	--tuner-replay "$d/plan" > "$d/replay.out" 2>&1 ||
	fail "replay: exit $?: $(tail -3 "$d/replay.out")"
n=$(grep -c '^tuner: step [0-9]*: experts .* (replayed)' "$d/replay.out")
[ "$n" = "$(grep -c 'experts' "$d/plan")" ] ||
	fail "replay: $n of the expert moves applied: $(grep '^tuner' "$d/replay.out")"
worst=$(loss_close "$d/even.csv" "$d/replay.csv" 80 \
	"moved experts and shares and the uninjected run") || exit 1
log "loss with $(wc -l < "$d/plan") replayed decisions against none: $worst relative at most"

# 3. stopped after the first move and resumed, from either tier
final=$(ls "$d"/replay/ckpt-00000080*.h5 | head -n 1)
[ -f "$final" ] || fail "the replay's final checkpoint is missing"
resumed() { # NAME WANT [ARGS...]: stop, resume, compare; WANT in its log
	local name=$1 want=$2 b
	shift 2
	train --log-every 10 --ckpt-every 10 --ckpt-dir "$d/$name" "$@" \
		--tuner-replay "$d/plan" --stop-at $((at + 2)) > "$d/$name-1.out" 2>&1
	[ $? = 75 ] || fail "$name: stop at $((at + 2)): not exit 75: $(tail -3 "$d/$name-1.out")"
	train --log-every 10 --ckpt-every 10 --ckpt-dir "$d/$name" "$@" \
		--tuner-replay "$d/plan" --resume > "$d/$name-2.out" 2>&1 ||
		fail "$name: resume: exit $?: $(tail -3 "$d/$name-2.out")"
	grep -q "$want" "$d/$name-2.out" ||
		fail "$name: not $want: $(grep '^tuner\|^resume' "$d/$name-2.out" | head -5)"
	b=$(ls "$d/$name"/ckpt-00000080*.h5 | head -n 1)
	[ -f "$b" ] || fail "$name: final checkpoint missing"
	for g in /model /optim/m /optim/v; do
		h5diff "$final" "$b" $g $g >/dev/null || fail "$name: $g differs after a resume"
	done
	log "$name: $(grep -m1 '^resume:' "$d/$name-2.out" | cut -c1-60)...; $want; bitwise equal"
}
resumed shared "resumed with the checkpoint's placement ([0-9]* expert swaps, experts moved)"
local=/dev/shm/sigma-test-experts
rm -rf "$local"
# tier 1 every step, the shared tier at the stop only: the stop's shared
# checkpoint is taken away, so the resume reads tier 1's copies
tier1_only() {
	train --log-every 10 --ckpt-every 1 --ckpt-full-every 1000 --ckpt-dir "$d/tier1" \
		--local-ckpt-dir "$local" --tuner-replay "$d/plan" "$@"
}
tier1_only --stop-at $((at + 2)) > "$d/tier1-1.out" 2>&1
[ $? = 75 ] || fail "tier1: stop: not exit 75: $(tail -3 "$d/tier1-1.out")"
rm -f "$d"/tier1/*-000000$((at + 2))*
tier1_only --ckpt-full-every 80 --resume > "$d/tier1-2.out" 2>&1 ||
	fail "tier1: resume: exit $?: $(tail -3 "$d/tier1-2.out")"
grep -q "^resume: tier 1, step $((at + 2)) " "$d/tier1-2.out" ||
	fail "tier1: not resumed from tier 1 at step $((at + 2)): $(grep '^resume' "$d/tier1-2.out")"
grep -q "resumed with the checkpoint's placement ([0-9]* expert swaps)$" "$d/tier1-2.out" ||
	fail "tier1: the placement not taken as the slots hold it: $(grep '^tuner' "$d/tier1-2.out" | head -3)"
b=$(ls "$d"/tier1/ckpt-00000080*.h5 | head -n 1)
[ -f "$b" ] || fail "tier1: final checkpoint missing"
for g in /model /optim/m /optim/v; do
	h5diff "$final" "$b" $g $g >/dev/null || fail "tier1: $g differs after a resume from tier 1"
done
log "tier1: $(grep -m1 '^resume:' "$d/tier1-2.out" | cut -c1-60)...; bitwise equal"
rm -rf "$local"
log "ok"
