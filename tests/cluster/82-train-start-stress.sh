#!/bin/bash
# Start-up stress of the parallel layouts (issue #25: rank 0 of a 4-rank
# pp 2 x ep 2 job died with SIGSEGV near the start, now and then): the
# short version of bench/pp-ep-stress, 5 runs of 4 ranks under srun: pp 2 x
# ep 2 with 2 micro-batches without and with the node-local tier, pp 2 x
# ep 1 without and with it while every core is kept busy, then dp 4 x ep 2;
# the token file prepared just before the run (once at the start for the
# third). Every run must end 0 having trained all its steps; a crash keeps
# its directory under the work directory (the output of every rank, Open
# MPI's backtrace, core files), named in the failure.
# The long run for the issue: bench/pp-ep-stress -n 200 --fresh-testbed 25
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
need_train
STRESS=$SIGMA_SRCDIR/bench/pp-ep-stress
[ -x "$STRESS" ] || fail "$STRESS missing or not executable"

d=$(workdir train-start-stress)
log "5 runs of bench/pp-ep-stress in $d"
"$STRESS" -n 5 --build "$SIGMA_BUILDDIR" --out "$d" --timeout 180 ||
	fail "start-up stress: $(grep -c $'\tpass\t' "$d/summary.tsv") of 5 runs passed: $(awk -F'\t' 'NR > 1 && $9 != "pass" { printf "run %s (%s, tier1 %s): %s, exit %s; ", $1, $2, $3, $9, $8 }' "$d/summary.tsv")"
[ "$(grep -c $'\tpass\t' "$d/summary.tsv")" = 5 ] ||
	fail "summary.tsv does not list 5 passing runs: $(cat "$d/summary.tsv")"
log "ok"
