#!/bin/bash
# A flipped byte in the newest shared checkpoint: a dp 2 run on two nodes
# writes checkpoints at steps 4, 8 and 12 and stops; one byte of step 12's
# file is inverted, inside the data of /model/tok_emb (found with h5ls:
# tensor data under a Fletcher32 checksum, not unused space between HDF5
# objects). The resumed run must refuse that file before libhdf5 reads it,
# by its seal, with a message naming it, continue from step 8, and end
# bitwise equal to an uninterrupted run. (Fletcher32 still stands behind
# the seal: test_trainer_ckpt re-seals a damaged file and sees it refused.)
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
need_train
command -v h5diff >/dev/null || skip "h5diff not installed"
command -v python3 >/dev/null || skip "python3 not installed"

export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive SIGMA_COMM_TIMEOUT=60
d=$(workdir ckpt-corrupt)
"$TRAIN" prepare --train-out "$d/train.tok" --val-out "$d/val.tok" "$F/fortunes" >/dev/null ||
	fail "prepare failed"
ARGS="--train $d/train.tok --preset small --batch 8 --warmup 2 --seed 7
	--threads 1 --log-every 1 --eval-every 0 --dp 2 --ckpt-every 4"


log "reference: 16 steps"
train_dp2 ref 0 --steps 16
log "stopped after step 12, checkpoints at 4, 8, 12"
train_dp2 t 75 --steps 16 --stop-at 12
ck=$d/t/ckpt-00000012.h5
[ -f "$ck" ] && [ -f "$d/t/ckpt-00000008.h5" ] || fail "checkpoints missing: $(ls "$d/t")"
size=$(stat -c %s "$ck")
# the address of the tensor's chunk: the last line of h5ls -va
addr=$(h5ls -va "$ck/model/tok_emb" | awk '$1 ~ /^0x/ { a = $3 } END { print a }')
[ -n "$addr" ] && [ "$addr" -gt 0 ] || fail "no chunk address of model/tok_emb: $(h5ls -va "$ck/model/tok_emb" | tail -n 3)"
off=$((addr + 1000))
python3 - "$ck" "$off" <<'PY' || fail "cannot flip a byte of $ck"
import sys
p, off = sys.argv[1], int(sys.argv[2])
with open(p, "r+b") as f:
    f.seek(off)
    b = f.read(1)
    f.seek(off)
    f.write(bytes([b[0] ^ 0xFF]))
PY
log "flipped the byte at offset $off of $size in $(basename "$ck")"
train_dp2 t 0 --steps 16 --resume
grep -q "checkpoint refused: $ck does not match its seal: $size bytes with hash [0-9a-f]\{16\}, the seal says $size bytes with hash [0-9a-f]\{16\} (damaged or changed since it was published); trying an older one" "$d/t.err" ||
	fail "the damaged file was not refused by name: $(grep -i refused "$d/t.err")"
grep -q "^resume: $d/t/ckpt-00000008.h5, continuing at step 8$" "$d/t.out" ||
	fail "did not resume at step 8: $(grep resume "$d/t.out")"
for g in /model /optim/m /optim/v; do
	h5diff "$d/ref/ckpt-00000016.h5" "$d/t/ckpt-00000016.h5" $g $g >/dev/null ||
		fail "$g differs from the uninterrupted run at step 16"
done
log "damaged step 12 refused, resumed at step 8, bitwise equal at step 16"
exit 0
