#!/bin/bash
# sigma.so's options: listed by sbatch, srun and salloc --help; a bad value
# of each option is refused at submit time with a message naming the option
# and the accepted values, and nothing is queued.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
grep -q 'sigma.so' "$SIGMA_TESTBED_DIR/etc/plugstack.conf" || skip "sigma.so not loaded"

for cmd in sbatch srun salloc; do
	help=$(run_as_user "$cmd" --help 2>&1)
	for opt in sigma-probe=off\|quick\|full sigma-ckpt-dir=DIR \
		sigma-ckpt-every=STEPS sigma-spares=N sigma-max-restarts=N; do
		grep -qF -- "--$opt" <<<"$help" || fail "$cmd --help does not list --$opt"
	done
	log "$cmd --help lists the five --sigma-* options"
done

d=$(workdir options)
before=$(squeue -h | wc -l)
check_refused() { # OPTION=VALUE EXPECTED-TEXT
	local out rc
	out=$(cd "$d" && run_as_user sbatch --parsable "--$1" --wrap true 2>&1)
	rc=$?
	[ $rc != 0 ] || fail "sbatch --$1 was accepted (job $out)"
	grep -qF -- "$2" <<<"$out" || fail "sbatch --$1: message lacks '$2': $out"
	log "sbatch --$1 refused: $(head -1 <<<"$out")"
}
check_refused sigma-probe=thorough "--sigma-probe=thorough: expected one of off|quick|full"
check_refused sigma-ckpt-dir=relative/dir "--sigma-ckpt-dir=relative/dir: expected an absolute path"
check_refused sigma-ckpt-every=0 "--sigma-ckpt-every=0: expected a whole number from 1 to"
check_refused sigma-spares=-2 "--sigma-spares=-2: expected a whole number from 0 to 1024"
check_refused sigma-max-restarts=many "--sigma-max-restarts=many: expected a whole number"
# srun refuses too, before asking for an allocation
out=$(cd "$d" && run_as_user srun --sigma-spares=x true 2>&1) && fail "srun accepted --sigma-spares=x"
grep -qF -- "--sigma-spares=x" <<<"$out" || fail "srun message: $out"
after=$(squeue -h | wc -l)
[ "$after" = "$before" ] || fail "a refused job was queued ($before jobs before, $after after)"

# good values are accepted and the job runs
jid=$(cd "$d" && run_as_user sbatch --parsable --wait --sigma-probe=off \
	--sigma-spares=0 --sigma-max-restarts=2 --sigma-ckpt-every=10 -o /dev/null --wrap true) ||
	fail "a job with good --sigma-* values failed"
[ "$(jstate "$jid")" = COMPLETED ] || fail "job $jid is $(jstate "$jid")"
log "good values: job $jid COMPLETED"
