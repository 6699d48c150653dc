#!/bin/bash
# A batch job across the four primary nodes, submitted by a non-root user:
# COMPLETED, one step task on each of four distinct nodes.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"

d=$(workdir sbatch4)
cat > "$d/job.sh" <<'JOB'
#!/bin/bash
#SBATCH -N4 --constraint=primary
srun bash -c 'echo "task $SLURM_PROCID on $SLURMD_NODENAME"'
JOB
jid=$(cd "$d" && run_as_user sbatch --parsable --wait -o "$d/out-%j" "$d/job.sh") ||
	fail "sbatch --wait failed: $(cat "$d"/out-* 2>/dev/null)"
log "job $jid: $(jstate "$jid")"
cat "$d/out-$jid"
[ "$(jstate "$jid")" = COMPLETED ] || fail "job $jid is $(jstate "$jid"), not COMPLETED"
n=$(grep -c '^task [0-3] on n[1-4]$' "$d/out-$jid")
[ "$n" = 4 ] || fail "expected 4 task lines, got $n"
nodes=$(awk '/^task/ {print $4}' "$d/out-$jid" | sort -u | wc -l)
[ "$nodes" = 4 ] || fail "tasks ran on $nodes distinct nodes, not 4"
[ "$(jfield "$jid" UserId | cut -d'(' -f1)" = "$SIGMA_TEST_USER" ] ||
	fail "job ran as $(jfield "$jid" UserId), not $SIGMA_TEST_USER"
