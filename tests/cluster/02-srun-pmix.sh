#!/bin/bash
# srun --mpi=pmix across two nodes: a PMIx put/commit/fence/get exchange
# between ranks on different nodes, and an Open MPI allreduce.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"

px=$SIGMA_BUILDDIR/tests/cluster/pmix_exchange
mpi=$SIGMA_BUILDDIR/tests/cluster/mpi_allreduce
[ -x "$px" ] || skip "pmix_exchange not built (configure found no PMIx)"
need_srun_pmix

out=$(srun --mpi=pmix -N2 -n4 --ntasks-per-node=2 "$px" 2>&1) || fail "srun pmix_exchange: $out"
echo "$out"
[ "$(grep -c '^rank [0-3] size 4 node n' <<<"$out")" = 4 ] || fail "expected 4 ranks of size 4"
[ "$(awk '/^rank/ {print $6}' <<<"$out" | sort -u | wc -l)" = 2 ] || fail "ranks not on 2 nodes"
# each rank must read exactly the node its neighbour published
while read -r _ r _ s _ node _ peer _ peernode; do
	want=$(awk -v p="$peer" '$1 == "rank" && $2 == p {print $6}' <<<"$out")
	[ "$peernode" = "$want" ] || fail "rank $r read peer $peer node '$peernode', peer is on '$want'"
done < <(grep '^rank' <<<"$out")

if [ -x "$mpi" ]; then
	out=$(srun --mpi=pmix -N2 -n4 --ntasks-per-node=2 "$mpi" 2>&1) || fail "srun mpi_allreduce: $out"
	echo "$out"
	[ "$(grep -c 'sum 10 expect 10$' <<<"$out")" = 4 ] || fail "MPI_Allreduce did not give 10 on 4 ranks"
fi
