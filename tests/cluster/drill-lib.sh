# tests/cluster/drill-lib.sh - helpers of the recovery drill (tests 90-99),
# sourced after lib.sh and sigmad-lib.sh. The drill runs the real trainer
# through contrib/examples/train-moe.sbatch on 4 nodes, with the plugin,
# the probe as health check (fault injection) and sigmad.

TRAIN=$SIGMA_BUILDDIR/trainer/sigma-train
EXAMPLE=$SIGMA_SRCDIR/contrib/examples/train-moe.sbatch
LAUNCHER=$SIGMA_BUILDDIR/trainer/sigma-launch
CORPUS=/usr/share/games/fortunes

# drill_setup NAME: skip unless everything the drill needs is here; a fresh
# sigmad with n5,n6 reserved; d = a work directory of the test user with a
# prepared corpus
drill_setup() {
	[ -x "$TRAIN" ] || skip "sigma-train not built"
	[ -r "$CORPUS/fortunes" ] || skip "fortunes-min not installed"
	command -v h5diff >/dev/null || skip "h5diff not installed"
	grep -q '^#define HAVE_PMIX 1' "$SIGMA_BUILDDIR/config.h" || skip "built without PMIx"
	grep -q '^#define HAVE_MPI 1' "$SIGMA_BUILDDIR/config.h" || skip "built without MPI"
	need_srun_pmix
	grep -q '^required' "$SIGMA_TESTBED_DIR/etc/plugstack.conf" 2>/dev/null || skip "the plugin is not loaded"
	grep -q '^HealthCheckProgram' "$SLURM_CONF" || skip "sigma-probe is not the health check"
	sigmad_fresh
	d=$(workdir "$1")
	run_as_user "$TRAIN" prepare --train-out "$d/train.tok" --val-out "$d/val.tok" \
		"$CORPUS/fortunes" "$CORPUS/literature" "$CORPUS/riddles" >/dev/null ||
		fail "prepare failed"
	: > "$d/marks"
}

# drill_submit NAME MAX_RESTARTS STEPS [SBATCH OPTION...]: the example job
# of the test user on 4 nodes, restarted by sigmad's requeue unless the
# options say otherwise, named NAME (its checkpoints go to ckpt_root/USER/NAME),
# checkpoint every 10 steps, one spare per recovery; output in $d/NAME.out;
# prints the job id. DRILL_LAYOUT, when set, is the job's SIGMA_LAYOUT;
# DRILL_ENV, when set, more VAR=VALUE of its environment (comma-separated).
drill_submit() {
	local jid name=$1 max=$2 steps=$3 env
	shift 3
	# a checkpoint directory left by an earlier run of the test (the job
	# name names it) would be resumed from
	rm -rf "$(ckdir "$name")"
	env="ALL,SIGMA_TRAIN=$TRAIN,SIGMA_DATA=$d,SIGMA_STEPS=$steps,SIGMA_LOG_EVERY=1,SIGMA_EVAL_EVERY=0"
	env="$env,SIGMA_LOCAL_CKPT_DIR=/dev/shm/sigma-local-$SIGMA_TEST_USER/$name"
	env="$env,SIGMA_LAUNCHER=$LAUNCHER,SIGMA_PROBE=$PROBE"
	env="$env,SIGMA_CONF=$SIGMA_TESTBED_DIR/etc/sigma.conf,SIGMACTL=$SIGMACTL"
	[ -n "${DRILL_LAYOUT+x}" ] && env="$env,SIGMA_LAYOUT=$DRILL_LAYOUT"
	[ -n "${DRILL_ENV:-}" ] && env="$env,$DRILL_ENV"
	# the example's own in-job restart and fifth node are for the tests
	# that ask for them (93, 94): the drill's sigmad path needs neither
	jid=$(cd "$d" && run_as_user sbatch --parsable -J "$name" -N4 \
		--sigma-restart=requeue --sigma-job-spares=0 --sigma-spares=1 \
		--sigma-max-restarts="$max" --sigma-ckpt-every=10 --sigma-probe=quick \
		--export="$env" -o "$d/$name.out" "$@" "$EXAMPLE") || fail "sbatch failed"
	echo "$jid"
}
drill_ended() { case "$(jstate "$1")" in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL) return 0 ;; esac; return 1; }
ckdir() { echo "$SIGMA_TESTBED_DIR/ckpt/$SIGMA_TEST_USER/$1"; }

# drill_inject NODE KEY=VALUE...: readings sigma-probe takes as measured
drill_inject() {
	local n=$1 f=$SIGMA_TESTBED_DIR/inject/$1
	shift
	printf '%s\n' "$@" > "$f.tmp"
	chmod 644 "$f.tmp"
	mv "$f.tmp" "$f"
	echo "$(date +%s) inject $n" >> "$d/marks"
}

# at_step OUT N [ATTEMPT]: OUT shows step N or later (of that attempt)
at_step() {
	awk -v n="$2" -v a="${3:-}" '
		/^attempt [0-9]+ start / { cur = $2 }
		/^step [0-9]+\// { split($2, s, "/"); if ((a == "" || cur == a) && s[1] + 0 >= n) f = 1 }
		END { exit !f }' "$1" 2>/dev/null
}
last_step() { sed -n 's|^step \([0-9]*\)/.*|\1|p' "$1" | tail -n 1; }
resumed_at() { grep "continuing at step" "$1" | tail -n 1 | sed 's/.*continuing at step //'; }
started() { grep -q "^attempt $2 start" "$1" 2>/dev/null; }
# the whole value of a field that may hold spaces (AdminComment)
jfield_all() { scontrol show job "$1" 2>/dev/null | sed -n "s/^ *$2=//p"; }

# rank_pid JOB NODE: the pid of the job's sigma-train rank on NODE (every
# slurmd of the testbed runs on this machine)
# (grep -z reads the NUL-separated environment itself: a pipe into grep -q
# fails now and then under pipefail, its writer killed by SIGPIPE)
rank_pid() {
	local p
	for p in $(pgrep -x sigma-train); do
		grep -qzx "SLURMD_NODENAME=$2" "/proc/$p/environ" 2>/dev/null || continue
		grep -qzx "SLURM_JOB_ID=$1" "/proc/$p/environ" 2>/dev/null && { echo "$p"; return 0; }
	done
	return 1
}
