# tests/cluster/ckpt-lib.sh - helpers of the 4-node checkpoint tier tests
# (78, 79), sourced after lib.sh: the trainer, a token file, the spares
# as ordinary nodes, and a run of 4 ranks on 4 named nodes.

need_train
command -v h5diff >/dev/null || skip "h5diff not installed"
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive SIGMA_COMM_TIMEOUT=60

# ckpt_setup NAME: $d, a fresh work directory with train.tok in it
ckpt_setup() {
	d=$(workdir "$1")
	"$TRAIN" prepare --train-out "$d/train.tok" --val-out "$d/val.tok" \
		"$F/fortunes" >/dev/null || fail "prepare failed"
}

# spares_free: the new node sets take n5 or n6, which sigmad keeps in its
# reservation: stop sigmad (only a process that is sigmad: a stale pid
# file may name anything) and delete the reservation for the test; start
# sigmad again at the end (it reserves the spares again)
spares_free() {
	local p
	SIGMAD_WAS_UP=0
	p=$(cat "$SIGMA_TESTBED_DIR/run/sigmad.pid" 2>/dev/null)
	if [ -n "$p" ] && [ "$(cat "/proc/$p/comm" 2>/dev/null)" = sigmad ]; then
		kill "$p"
		until_true 20 sh -c "! kill -0 $p 2>/dev/null" || fail "sigmad $p did not stop"
		SIGMAD_WAS_UP=1
	fi
	scontrol delete reservation=sigma_spares 2>/dev/null
	trap spares_back EXIT
}
spares_back() {
	[ "$SIGMAD_WAS_UP" = 1 ] || return 0
	"$SIGMA_BUILDDIR/sbin/sigmad" --config "$SIGMA_TESTBED_DIR/etc/sigma.conf" \
		--pidfile "$SIGMA_TESTBED_DIR/run/sigmad.pid" \
		--logfile "$SIGMA_TESTBED_DIR/log/sigmad.log" ||
		echo "warning: sigmad did not start again" >&2
}

# run4 NAME NODES WANT_RC [FLAGS]: 4 ranks, one per node, shared
# checkpoints in $d/NAME, output in $d/NAME.out and .err
run4() {
	local name=$1 nodes=$2 want=$3
	shift 3
	# shellcheck disable=SC2086
	timeout 150 srun --mpi=pmix --kill-on-bad-exit=1 -N4 -n4 -w "$nodes" \
		"$TRAIN" $ARGS --ckpt-dir "$d/$name" "$@" \
		>> "$d/$name.out" 2>> "$d/$name.err"
	local rc=$?
	[ "$rc" = "$want" ] || fail "$name on $nodes: srun exited $rc, want $want: $(tail -n 5 "$d/$name.err")"
}

# same_state A B: weights and both moments of two checkpoints bitwise equal
same_state() {
	local g
	for g in /model /optim/m /optim/v; do
		h5diff "$1" "$2" $g $g >/dev/null || return 1
	done
}
