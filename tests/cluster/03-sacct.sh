#!/bin/bash
# Accounting: a finished multi-node job shows in sacct (slurmdbd on MariaDB)
# with its state, node count, user and exit code.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"

d=$(workdir sacct)
jid=$(cd "$d" && run_as_user sbatch --parsable --wait -N2 -J sacct-probe -o /dev/null --wrap 'srun true; exit 3')
log "job $jid finished: $(jstate "$jid")"
row() { sacct -n -P -X -j "$jid" -o jobid,jobname,state,nnodes,user,exitcode 2>/dev/null; }
# slurmctld sends the job's records to slurmdbd asynchronously: a step or
# completion record can arrive first and make a placeholder row ("allocation",
# uid 0) that the start record fills in later; wait for the whole record
until_true 30 sh -c "sacct -n -P -X -j $jid -o jobname,state | grep -qx 'sacct-probe|FAILED'" ||
	fail "sacct has no complete FAILED row for job $jid: '$(row)'"
r=$(row)
echo "$r"
IFS='|' read -r id name state nn user ec <<<"$r"
[ "$id" = "$jid" ] || fail "sacct jobid '$id'"
[ "$name" = sacct-probe ] || fail "sacct jobname '$name'"
[ "$nn" = 2 ] || fail "sacct nnodes '$nn'"
[ "$user" = "$SIGMA_TEST_USER" ] || fail "sacct user '$user'"
[ "$ec" = "3:0" ] || fail "sacct exitcode '$ec', expected 3:0"
# the step row too
sacct -n -P -j "$jid" -o jobid,state | grep -q "^$jid.0|COMPLETED" || fail "no COMPLETED step $jid.0 in sacct"
