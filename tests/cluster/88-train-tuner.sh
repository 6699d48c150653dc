#!/bin/bash
# The auto-tuner on 4 data-parallel ranks under srun (docs/tuner.md):
#   1. a rank made 2x slower gets a smaller share within the documented
#      bound (a full window, then ceil(W/2) + C summaries of K steps);
#   1b. a rank whose messages are held 3 ms (a slow link) is named by the
#      link probe and gets a smaller share within the same bound;
#   2. a hiccup of 3 steps changes nothing (above the band, which is
#      set above the noise of shared cores);
#   3. replayed uneven shares keep the loss within 1e-6 relative of even
#      shares at every step;
#   4. a replaying run stopped and resumed is bitwise the uninterrupted one.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
need_train

export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
d=$(workdir train-tuner)
train_corpus
ARGS="--train $d/train.tok --preset small --batch 32 --seq-len 32 --warmup 5
	--eval-every 0 --threads 1 --seed 5"
train() { timeout 300 srun --mpi=pmix --kill-on-bad-exit=1 -N2 -n4 "$TRAIN" $ARGS "$@"; }
# first_move WHAT OUT: line, at (its step) and s0..s3 (its shares) of the
# first decision in OUT, which must come by step 40
first_move() {
	line=$(grep -m1 '^tuner: step [0-9]*: shares' "$2") ||
		fail "$1: the shares did not move: $(grep '^step\|^tuner' "$2")"
	at=$(sed 's/^tuner: step \([0-9]*\):.*/\1/' <<<"$line")
	IFS=, read -r s0 s1 s2 s3 <<<"$(sed 's/.* shares \([0-9,]*\) .*/\1/' <<<"$line")"
	[ "$at" -le 40 ] || fail "$1: the shares moved at step $at, the bound is 40"
}

# 1. K 4, W 5, C 2: the window is full at step 20, acted on by step 40
SIGMA_TUNER_INJECT=slow:3:2 train --steps 60 --log-every 10 --tuner on \
	> "$d/slow.out" 2>&1 || fail "slow rank: exit $?: $(tail -3 "$d/slow.out")"
first_move "slow rank" "$d/slow.out"
# rank 3 gets fewer than its even 8 and fewer than every other rank (how
# the rest is spread over them follows the others' measured pace, which
# on two shared cores is noisy too)
[ "$s3" -lt 8 ] && [ "$s3" -lt "$s0" ] && [ "$s3" -lt "$s1" ] && [ "$s3" -lt "$s2" ] ||
	fail "slow rank: $line: rank 3 should get fewer than 8, and fewest"
grep -q "^tuner: step [0-9]*: rank 3 slow" "$d/slow.out" || fail "slow rank: rank 3 not named"
grep -q "tuner on slowest 3 " "$d/slow.out" || fail "slow rank: the progress line lacks the tuner"
log "slow rank 3: $line (detected at step $at)"

# 1b. a slow link: rank 2's messages 3 ms late; its probe is, so is its
# share (a step sends 2 blocking messages: 1 ms each costs less than one
# sequence's compute here, and the shares stay even)
SIGMA_TUNER_INJECT=link:2:3000 train --steps 60 --log-every 10 --tuner on \
	> "$d/link.out" 2>&1 || fail "slow link: exit $?: $(tail -3 "$d/link.out")"
grep -q "^tuner: step [0-9]*: rank 2 link slow" "$d/link.out" ||
	fail "slow link: rank 2 not named: $(grep '^step\|^tuner' "$d/link.out")"
first_move "slow link" "$d/link.out"
[ "$s2" -lt 8 ] && [ "$s3" -ge 8 ] || fail "slow link: $line: rank 2 should get fewer than 8"
# rank 2 is the first link named. A healthy link may read slow later (one
# probe of rank 3 at 1.98x the median, with a build on the same 2 cores):
# that is the probe's noise here, not a misnamed rank
first=$(grep -m1 '^tuner: step [0-9]*: rank [0-9]* link slow' "$d/link.out")
case "$first" in
*": rank 2 link slow"*) ;;
*) fail "slow link: another rank's link named first: $first" ;;
esac
log "slow link of rank 2: $line (detected at step $at)"

# 2. a hiccup: 6x for 3 steps, one summary near 4.75x; the band is set
# at 2.5x, above the noise of 4 ranks on 2 shared cores (ranks differ by
# up to 1.8x in a summary there, and the default 1.25 is sometimes
# crossed with nothing injected), below the hiccup's summary: only the
# median keeps it from acting
SIGMA_TUNER_INJECT=slow:1:6@30-32 train --steps 60 --log-every 10 --tuner on \
	--tuner-slow 2.5 > "$d/hiccup.out" 2>&1 ||
	fail "hiccup: exit $?: $(tail -3 "$d/hiccup.out")"
grep '^tuner: ' "$d/hiccup.out" && fail "hiccup: the tuner acted"
log "a 3-step hiccup on rank 1: nothing done"

# 3. the loss with uneven shares
printf 'tuner: step 5: shares 12,12,4,4 (a test)\ntuner: step 22: shares 5,9,9,9 (a test)\n' > "$d/plan"
train --steps 40 --log-every 1 --ckpt-every 10 --ckpt-dir "$d/even" \
	--metrics "$d/even.csv" > "$d/even.out" 2>&1 || fail "even: exit $?"
train --steps 40 --log-every 1 --ckpt-every 10 --ckpt-dir "$d/replay" \
	--metrics "$d/replay.csv" --tuner-replay "$d/plan" > "$d/replay.out" 2>&1 ||
	fail "replay: exit $?: $(tail -3 "$d/replay.out")"
[ "$(grep -c '^tuner: step [0-9]*: shares .* (replayed)' "$d/replay.out")" = 2 ] ||
	fail "replay: not both decisions applied: $(grep '^tuner' "$d/replay.out")"
worst=$(loss_close "$d/even.csv" "$d/replay.csv" 40 "uneven shares and even ones") || exit 1
log "loss of shares 12,12,4,4 and 5,9,9,9 against even: $worst relative at most"

# 4. resumed, bitwise
train --steps 40 --log-every 10 --ckpt-every 10 --ckpt-dir "$d/resumed" \
	--tuner-replay "$d/plan" --stop-at 15 > "$d/r1.out" 2>&1
[ $? = 75 ] || fail "stop at 15: not exit 75: $(tail -3 "$d/r1.out")"
train --steps 40 --log-every 10 --ckpt-every 10 --ckpt-dir "$d/resumed" \
	--tuner-replay "$d/plan" --resume > "$d/r2.out" 2>&1 || fail "resume: exit $?"
grep -q '^tuner: resumed with the checkpoint.s shares' "$d/r2.out" ||
	fail "resume: the checkpoint's shares not taken: $(grep tuner "$d/r2.out" | head -3)"
a=$(ls "$d"/replay/ckpt-00000040*.h5 | head -n 1)
b=$(ls "$d"/resumed/ckpt-00000040*.h5 | head -n 1)
[ -f "$a" ] && [ -f "$b" ] || fail "final checkpoints missing"
for g in /model /optim/m /optim/v; do
	h5diff "$a" "$b" $g $g >/dev/null || fail "$g differs after a resume"
done
log "stopped at 15 and resumed: /model, /optim/m, /optim/v bitwise equal"
log "ok"
