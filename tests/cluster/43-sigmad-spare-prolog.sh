#!/bin/bash
# A spare whose prolog probe fails is blamed, not the node the job left. A
# sigma job (full prolog probes) loses n3; sigmad requeues it onto a spare
# whose full probe then fails (an injected memory-test failure the quick
# health check does not see). Slurm requeues the job again; sigmad must
# take the other spare, exclude the bad spare, and say so. It used to
# write "attempt 3: n1", leave the spare out of the excluded nodes, and
# count nothing against it.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
. "$SIGMA_SRCDIR/tests/cluster/sigmad-lib.sh"
grep -q '^HealthCheckProgram=' "$SLURM_CONF" || skip "no HealthCheckProgram in the testbed"
grep -q 'sigma.so' "$SIGMA_TESTBED_DIR/etc/plugstack.conf" || skip "sigma.so not loaded"

sigmad_fresh
d=$(workdir sigmad-spareprolog)
write_job "$d"
jid=$(cd "$d" && run_as_user sbatch --parsable -N4 --requeue --open-mode=append \
	--sigma-spares=1 --sigma-max-restarts=3 --sigma-probe=full --sigma-on-warning=checkpoint \
	-o "$d/out" "$d/job.sh") || fail "sbatch failed"
until_true 60 is_state "$jid" RUNNING || fail "job $jid not running"
until_true 20 sh -c "grep -q 'step 1 ' '$d/out'" || fail "job $jid prints no steps"
job_on "$jid" n3 || fail "job $jid is not on n3"
trap 'rm -f "$SIGMA_TESTBED_DIR"/inject/n[356]' EXIT
for s in n5 n6; do
	printf 'memtest=fail\n' > "$SIGMA_TESTBED_DIR/inject/$s"
	chmod 644 "$SIGMA_TESTBED_DIR/inject/$s"
done
# whichever spare sigmad picks fails its full probe; the other must then
# be healthy: the injection on it is removed as soon as the first fails
echo "ecc_uncorrected=2" > "$SIGMA_TESTBED_DIR/inject/n3"
until_true 60 sh -c 'sinfo -h -R -N -o "%N %E" | grep -q "^n[56] sigma: probe full: host memtest=fail"' ||
	fail "no spare failed its prolog: $(sinfo -R)"
bad=$(sinfo -h -R -N -o '%N %E' | awk '/^n[56] sigma: probe full: host memtest=fail/ {print $1; exit}')
good=n5
[ "$bad" = n5 ] && good=n6
rm -f "$SIGMA_TESTBED_DIR/inject/$good"
log "spare $bad failed its prolog probe: $(nreason "$bad")"
until_true 60 sh -c "squeue -h -t R -j $jid -o %N | grep -q ." ||
	fail "job $jid not running again: $(jstate "$jid") ($(jfield "$jid" Reason))"
nodes=$(job_nodes "$jid" | tr '\n' ' ')
log "job $jid running on $nodes"
case " $nodes" in *" $good "*) ;; *) fail "not on the healthy spare $good: $nodes" ;; esac
exc=$(jfield "$jid" ExcNodeList)
scontrol show hostnames "$exc" | grep -qx "$bad" || fail "$bad not excluded: ExcNodeList=$exc"
ac=$(scontrol show job "$jid" | sed -n 's/^ *AdminComment=//p')
log "AdminComment: $ac"
echo "$ac" | grep -q "sigma: attempt 3: $bad " || fail "attempt 3 does not name $bad: $ac"
