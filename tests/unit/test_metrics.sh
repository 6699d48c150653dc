#!/bin/bash
# test_metrics.sh - promtool check metrics on every metrics file sigma
# writes: sigma-probe's textfile (--metrics, on this host), sigmad's
# (written by the controller over the fake slurmctld of test_sigmad_ctl,
# which copies it to $SIGMA_METRICS_OUT) and sigma-train's
# (--metrics-textfile, a few steps of the small model). Then a broken file, to see that
# promtool here does fail on one. Skips when promtool is not installed
# (Debian: apt-get install prometheus).
set -uo pipefail

BLD=${top_builddir:-$(cd "$(dirname "$0")/../.." && pwd)/_build}
command -v promtool >/dev/null || {
	echo "skip: promtool not found (Debian: prometheus)"
	exit 77
}
T=$(mktemp -d "${TMPDIR:-/tmp}/test-metrics.XXXXXX")
trap 'rm -rf "$T"' EXIT
FAILS=0
bad() {
	echo "FAIL: $*"
	FAILS=$((FAILS + 1))
}
# check NAME FILE: promtool accepts it, and it has samples
check() {
	local out
	[ -s "$2" ] || { bad "$1: $2 is empty or missing"; return; }
	if out=$(promtool check metrics < "$2" 2>&1); then
		echo "ok: $1 ($(grep -vc '^#' "$2") samples)"
	else
		bad "$1: promtool check metrics: $out"
		cat "$2"
	fi
}

printf 'gpus=no\nstate_dir=%s/state\n' "$T" > "$T/sigma.conf"
"$BLD/sbin/sigma-probe" --config "$T/sigma.conf" --node c1 \
	--metrics "$T/probe.prom" quick >/dev/null
check "sigma-probe --metrics" "$T/probe.prom"

SIGMA_METRICS_OUT=$T/sigmad.prom "$BLD/tests/unit/test_sigmad_ctl" \
	>"$T/ctl.log" 2>&1 || { bad "test_sigmad_ctl failed"; cat "$T/ctl.log"; }
check "sigmad (sigmad_metrics_dir)" "$T/sigmad.prom"

# sigma-train's rank-0 textfile, after a few steps with a checkpoint
F=/usr/share/games/fortunes/fortunes
if [ -r "$F" ]; then
	"$BLD/trainer/sigma-train" prepare --train-out "$T/train.tok" \
		--val-out "$T/val.tok" "$F" >/dev/null &&
		env -u SLURM_JOB_ID "$BLD/trainer/sigma-train" --train "$T/train.tok" --preset small \
			--batch 4 --steps 4 --warmup 1 --threads 1 --log-every 2 \
			--eval-every 0 --ckpt-dir "$T/ck" --ckpt-every 2 \
			--metrics-textfile "$T/train.prom" >"$T/train.log" 2>&1 ||
		{ bad "sigma-train failed"; tail -5 "$T/train.log"; }
	check "sigma-train --metrics-textfile" "$T/train.prom"
	grep -qx 'sigma_train_step{slurm_job="none"} 4' "$T/train.prom" ||
		bad "sigma-train's textfile does not say step 4 of no job: $(grep step "$T/train.prom")"
	# every series of the trainer's is its own: the sigma_train_ prefix,
	# the job's label; none of the node's (sigma_probe_*, sigmad_*)
	grep -v '^#' "$T/train.prom" | grep -v '^sigma_train_[a-z_]*{slurm_job="none"' &&
		bad "sigma-train wrote a series not its own (above)"
else
	echo "skip: sigma-train's textfile ($F missing: fortunes-min)"
fi

# promtool must fail a malformed file, or the checks above prove nothing
sed 's/^sigma_spares{state="pool"} /sigma_spares{state="pool" /' \
	"$T/sigmad.prom" > "$T/broken.prom"
if promtool check metrics < "$T/broken.prom" >/dev/null 2>&1; then
	bad "promtool accepted a malformed file"
fi

echo "$FAILS failed"
[ "$FAILS" = 0 ]
