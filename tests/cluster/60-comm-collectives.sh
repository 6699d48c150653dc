#!/bin/bash
# The collectives of trainer/comm across two nodes, through srun --mpi=pmix:
# the PMIx bootstrap (rank, size, local rank and size, node name) and blob
# exchange (put/commit/fence/get, rank 0's blob to all), then every
# collective of the MPI back end on the world and on the layout's
# sub-communicators (dp, ep, expert_dp, pp, and a split that leaves ranks
# out), each result compared exactly by sigma-comm-test. Also 3 ranks (odd
# rings, uneven nodes), 1 rank under srun, and 1 process without srun.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"

t=$SIGMA_BUILDDIR/tests/cluster/sigma-comm-test
[ -x "$t" ] || skip "sigma-comm-test not built"
"$t" --help | grep -q 'check' || fail "sigma-comm-test --help"
grep -q '^#define HAVE_PMIX 1' "$SIGMA_BUILDDIR/config.h" || skip "built without PMIx"
grep -q '^#define HAVE_MPI 1' "$SIGMA_BUILDDIR/config.h" || skip "built without MPI"
need_srun_pmix

# check_run NTASKS OUTPUT: the common checks of one run's output
check_run() {
	local n=$1 out=$2 r want got
	for r in $(seq 0 $((n - 1))); do
		grep -q "^rank $r size $n local [0-9]*/[0-9]* node n[1-4] backend mpi$" <<<"$out" ||
			fail "rank $r did not report itself (size $n, node n1-n4)"
	done
	# every rank passed the same checks (the odd ranks skip one split)
	want=$(grep -c '^rank 0 PASS' <<<"$out")
	[ "$want" -gt 40 ] || fail "rank 0 passed only $want checks"
	for r in $(seq 0 $((n - 1))); do
		got=$(grep -c "^rank $r PASS" <<<"$out")
		[ $((want - got)) -le 1 ] || fail "rank $r passed $got checks, rank 0 $want"
	done
	grep -q "^comm check: all passed on $n ranks (mpi)$" <<<"$out" || fail "no closing line"
	! grep -q 'FAIL' <<<"$out" || fail "a check failed"
}

log "4 ranks on 2 nodes"
out=$(srun --mpi=pmix --kill-on-bad-exit=1 -N2 -n4 --ntasks-per-node=2 "$t" check 2>&1) ||
	fail "srun check on 4 ranks: $(tail -n 20 <<<"$out")"
check_run 4 "$out"
grep '^rank [0-3] size' <<<"$out"
# PMIx local ranks and node names: two ranks on each of two nodes
[ "$(awk '/^rank [0-3] size/ {print $8}' <<<"$out" | sort -u | wc -l)" = 2 ] ||
	fail "ranks not on 2 nodes"
for node in $(awk '/^rank [0-3] size/ {print $8}' <<<"$out" | sort -u); do
	[ "$(awk -v n="$node" '/^rank [0-3] size/ && $8 == n {print $6}' <<<"$out" | sort | tr '\n' ' ')" = "0/2 1/2 " ] ||
		fail "node $node: local ranks are not 0/2 and 1/2"
done
# the PMIx helpers: each rank read its neighbour's value, rank 0's blob
for r in 0 1 2 3; do
	grep -q "^rank $r PASS pmix put/commit/fence/get: rank $(((r + 1) % 4)) says 'rank $(((r + 1) % 4)) on n[1-4]'$" <<<"$out" ||
		fail "rank $r did not read its neighbour through PMIx"
done
[ "$(grep -c 'PASS pmix share: 200 bytes from rank 0' <<<"$out")" = 4 ] || fail "boot_share"
# the sub-communicators of the layout dp 2 x pp 2 with ep 2
for g in dp ep expert_dp pp; do
	[ "$(grep -c "PASS split $g: rank [01] of [12], members ok" <<<"$out")" = 4 ] ||
		fail "split $g not passed on 4 ranks"
	[ "$(grep -c "PASS $g alltoallv i32 uneven salt=2" <<<"$out")" = 4 ] ||
		fail "all-to-all on $g not passed on 4 ranks"
done
[ "$(grep -c 'PASS world alltoallv .* uneven' <<<"$out")" = 12 ] || fail "world all-to-all"
[ "$(grep -c 'PASS world sendrecv ring n=100000' <<<"$out")" = 4 ] || fail "world sendrecv"
[ "$(grep -c 'PASS world barrier' <<<"$out")" = 4 ] || fail "world barrier"
[ "$(grep -c 'PASS world iallreduce' <<<"$out")" = 4 ] || fail "world iallreduce"
[ "$(grep -c 'PASS world bcast n=333 from every root' <<<"$out")" = 4 ] || fail "world bcast"

log "3 ranks on 2 nodes"
out=$(srun --mpi=pmix --kill-on-bad-exit=1 -N2 -n3 "$t" check 2>&1) ||
	fail "srun check on 3 ranks: $(tail -n 20 <<<"$out")"
check_run 3 "$out"

log "1 rank under srun (MPI back end of one)"
out=$(srun --mpi=pmix -N1 -n1 "$t" --backend mpi check 2>&1) ||
	fail "srun check on 1 rank: $(tail -n 20 <<<"$out")"
check_run 1 "$out"

log "1 process without srun (self back end)"
out=$(env -u PMIX_NAMESPACE -u SLURM_NTASKS "$t" check 2>&1) || fail "alone: $(tail -n 20 <<<"$out")"
grep -q '^comm check: all passed on 1 ranks (self)$' <<<"$out" || fail "alone: no closing line"

log "srun without PMIx is refused, not run as 4 lonely jobs"
out=$(srun --mpi=none -N2 -n4 "$t" check 2>&1) && fail "srun --mpi=none: accepted"
[ "$(grep -c 'started as one of 4 tasks without a PMIx server' <<<"$out")" = 4 ] ||
	fail "srun --mpi=none: not refused with the reason: $out"
log "ok"
