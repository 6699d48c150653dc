#!/bin/bash
# sigma-train learns under Slurm: a batch job trains the demo shapes of
# model.md (batch 4, T 128) on Debian's fortunes with srun; the validation
# cross-entropy ends at least 0.5 nats below the corpus's unigram entropy,
# the run writes a checkpoint h5dump can read and a metrics file.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
TRAIN=$SIGMA_BUILDDIR/trainer/sigma-train
F=/usr/share/games/fortunes
[ -x "$TRAIN" ] || skip "sigma-train not built"
[ -r "$F/fortunes" ] || skip "fortunes-min not installed"

d=$(workdir train-learn)
train_corpus run_as_user
cat > "$d/job.sh" <<JOB
#!/bin/bash
#SBATCH -N1 -c2 -J learn
export OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive
srun $TRAIN --train $d/train.tok --val $d/val.tok --batch 4 --seq-len 128 \\
	--steps 200 --lr 3e-3 --warmup 20 --eval-every 50 --eval-batches 8 \\
	--log-every 20 --threads 2 --ckpt-dir $d/ckpt --metrics $d/metrics.csv
JOB
jid=$(cd "$d" && run_as_user sbatch --parsable --wait -o "$d/out-%j" "$d/job.sh") ||
	fail "job failed: $(tail -5 "$d"/out-* 2>/dev/null)"
out=$d/out-$jid
cat "$out"
entropy=$(sed -n 's/.*unigram entropy \([0-9.]*\) nats.*/\1/p' "$out")
first=$(grep -m1 '^step .* loss' "$out" | awk '{print $6}')
val=$(grep 'val_ce' "$out" | tail -1 | awk '{print $4}')
[ -n "$entropy" ] && [ -n "$val" ] || fail "no entropy or val_ce in the output"
log "unigram entropy $entropy nats, ce at step 20 $first, final val_ce $val"
awk -v e="$entropy" -v v="$val" 'BEGIN { exit !(v < e - 0.5) }' ||
	fail "validation cross-entropy $val is not 0.5 nats below the unigram entropy $entropy"
ck=$d/ckpt/ckpt-00000200.h5
[ -f "$ck" ] || fail "no final checkpoint $ck"
[ "$(stat -c %U "$ck")" = "$SIGMA_TEST_USER" ] || fail "$ck written as $(stat -c %U "$ck")"
h5dump -A -g /config "$ck" | grep -q '"D"' || fail "h5dump cannot read $ck"
rows=$(grep -c '^[0-9]' "$d/metrics.csv")
[ "$rows" -ge 10 ] || fail "metrics.csv has $rows rows"
