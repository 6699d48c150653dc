# tests/cluster/lib.sh - helpers for cluster test scripts (source it).
# Every helper reads Slurm through its commands, as a user would.

T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "skipped: $*"; exit 77; }

# until_true SECONDS CMD...: poll every 0.5 s; false on timeout
until_true() {
	local end=$(( $(date +%s) + $1 ))
	shift
	until "$@"; do
		[ "$(date +%s)" -lt "$end" ] || return 1
		sleep 0.5
	done
}

# rec_state REC, rec_field REC FIELD: a job's state, one of its fields, read
# from REC, the text of one `scontrol show job`
rec_state() { sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' <<<"$1"; }
rec_field() { tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p" | head -1; }
jstate() { rec_state "$(scontrol show job "$1" 2>/dev/null)"; }
is_state() { [ "$(jstate "$1")" = "$2" ]; }
# jfield JOB FIELD: one field of scontrol show job
jfield() { rec_field "$(scontrol show job "$1" 2>/dev/null)" "$2"; }
nstate() { sinfo -h -n "$1" -o %t | head -1; }
nreason() { scontrol show node "$1" | sed -n 's/^ *Reason=//p'; }

# run_as_user CMD...: run a command as the non-root test user, with the
# testbed's environment, in a directory the user owns
run_as_user() {
	runuser -u "$SIGMA_TEST_USER" -- env SLURM_CONF="$SLURM_CONF" \
		OMPI_MCA_pml="$OMPI_MCA_pml" OMPI_MCA_btl="$OMPI_MCA_btl" \
		OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo \
		PATH="$PATH" HOME="$(getent passwd "$SIGMA_TEST_USER" | cut -d: -f6)" "$@"
}

# the second non-root user, whose jobs a test attacks as the test user
SIGMA_VICTIM_USER=${SIGMA_VICTIM_USER:-sigmavictim}
# run_as_victim CMD...: as run_as_user, as the victim (created when missing)
run_as_victim() {
	id "$SIGMA_VICTIM_USER" >/dev/null 2>&1 ||
		useradd --create-home --shell /bin/bash "$SIGMA_VICTIM_USER" ||
		fail "cannot create user $SIGMA_VICTIM_USER"
	runuser -u "$SIGMA_VICTIM_USER" -- env SLURM_CONF="$SLURM_CONF" PATH="$PATH" \
		HOME="$(getent passwd "$SIGMA_VICTIM_USER" | cut -d: -f6)" "$@"
}

# workdir NAME: a fresh directory owned by the test user, printed
workdir() {
	local d=$SIGMA_TESTBED_DIR/work/$1
	rm -rf "$d"
	mkdir -p "$d"
	chmod 755 "$SIGMA_TESTBED_DIR/work"
	chown "$SIGMA_TEST_USER" "$d"
	echo "$d"
}

# need_train: sigma-train built with PMIx and MPI, and the fortunes corpus
# (TRAIN, F), else the test is skipped
# need_srun_pmix: srun can start ranks with a PMIx server (Slurm's mpi/pmix
# plugin). Debian's Slurm 26.05.5-1 ships without it (Debian bug #1149781).
need_srun_pmix() {
	srun --mpi=list 2>&1 | grep -qw pmix ||
		skip "this Slurm has no mpi/pmix plugin (srun --mpi=list): no rank starts under srun --mpi=pmix"
}
need_train() {
	TRAIN=$SIGMA_BUILDDIR/trainer/sigma-train
	F=/usr/share/games/fortunes
	[ -x "$TRAIN" ] || skip "sigma-train not built"
	[ -r "$F/fortunes" ] || skip "fortunes-min not installed"
	grep -q '^#define HAVE_PMIX 1' "$SIGMA_BUILDDIR/config.h" || skip "built without PMIx"
	grep -q '^#define HAVE_MPI 1' "$SIGMA_BUILDDIR/config.h" || skip "built without MPI"
	need_srun_pmix
}

# train_corpus [run_as_user]: $d/train.tok and $d/val.tok prepared from the
# fortunes corpora (as the test user when asked), else the test fails
train_corpus() {
	"$@" "$TRAIN" prepare --train-out "$d/train.tok" --val-out "$d/val.tok" \
		"$F/fortunes" "$F/literature" "$F/riddles" >/dev/null ||
		fail "prepare failed"
}

# train_dp2 NAME WANT_RC [FLAGS]: sigma-train $ARGS FLAGS as dp 2 on n1 and
# n2 with its checkpoints in $d/NAME, output appended to $d/NAME.out and
# .err; the test fails unless srun exits WANT_RC
train_dp2() {
	local name=$1 want=$2 rc
	shift 2
	# shellcheck disable=SC2086
	timeout 120 srun --mpi=pmix --kill-on-bad-exit=1 -N2 -n2 -w n1,n2 \
		"$TRAIN" $ARGS --ckpt-dir "$d/$name" "$@" \
		>> "$d/$name.out" 2>> "$d/$name.err"
	rc=$?
	[ "$rc" = "$want" ] || fail "$name: srun exited $rc, want $want: $(tail -n 5 "$d/$name.err")"
}

# loss_close REF.CSV CSV STEPS WHAT: the loss (column 2) of every one of
# STEPS steps of CSV within 1e-6 relative of REF.CSV's; prints the worst
loss_close() {
	local worst
	worst=$(awk -F, 'FNR == 1 { next } NR == FNR { a[$1] = $2; next }
		{ r = ($2 - a[$1]) / a[$1]; if (r < 0) r = -r; if (r > w) w = r; n++ }
		END { printf "%.3g %d", w, n }' "$1" "$2")
	[ "${worst#* }" = "$3" ] || fail "loss: ${worst#* } steps compared, want $3"
	awk -v w="${worst% *}" 'BEGIN { exit !(w <= 1e-6) }' ||
		fail "loss: $4 differ by ${worst% *} relative"
	echo "${worst% *}"
}
