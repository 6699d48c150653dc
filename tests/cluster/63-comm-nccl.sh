#!/bin/bash
# The NCCL back end: where a GPU is visible, every check of sigma-comm-test
# on device memory, one rank per GPU of this machine (the unique id handed
# out through PMIx); where none is, the back end must refuse with its
# reason instead of crashing, and the test is skipped.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"

t=$SIGMA_BUILDDIR/tests/cluster/sigma-comm-test
[ -x "$t" ] || skip "sigma-comm-test not built"
grep -q '^#define HAVE_NCCL 1' "$SIGMA_BUILDDIR/config.h" || skip "built without NCCL"
grep -q '^#define HAVE_PMIX 1' "$SIGMA_BUILDDIR/config.h" || skip "built without PMIx"
need_srun_pmix

ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ "${ngpu:-0}" = 0 ]; then
	out=$(srun --mpi=pmix -N1 -n1 "$t" --backend nccl check 2>&1) && fail "NCCL without a GPU: accepted"
	grep -q 'NCCL back end: no CUDA device' <<<"$out" || fail "NCCL without a GPU: $out"
	skip "no GPU here: only the refusal was checked"
fi

log "$ngpu GPU(s): NCCL on $ngpu rank(s) of one node"
out=$(SIGMA_COMM_TIMEOUT=120 srun --mpi=pmix --kill-on-bad-exit=1 -N1 -n"$ngpu" \
	"$t" --backend nccl check 2>&1) || fail "srun NCCL check: $(tail -n 20 <<<"$out")"
grep -v PASS <<<"$out"
grep -q "^comm check: all passed on $ngpu ranks (nccl)$" <<<"$out" || fail "no closing line"
! grep -q FAIL <<<"$out" || fail "a check failed"
log "ok"
