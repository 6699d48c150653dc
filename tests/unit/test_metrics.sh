#!/bin/bash
# test_metrics.sh - promtool check metrics on every metrics file sigma
# writes: sigma-probe's textfile (--metrics, on this host), and sigmad's
# (written by the controller over the fake slurmctld of test_sigmad_ctl,
# which copies it to $SIGMA_METRICS_OUT). Then a broken file, to see that
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

# promtool must fail a malformed file, or the checks above prove nothing
sed 's/^sigma_spares{state="pool"} /sigma_spares{state="pool" /' \
	"$T/sigmad.prom" > "$T/broken.prom"
if promtool check metrics < "$T/broken.prom" >/dev/null 2>&1; then
	bad "promtool accepted a malformed file"
fi

echo "$FAILS failed"
[ "$FAILS" = 0 ]
