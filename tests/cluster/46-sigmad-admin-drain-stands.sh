#!/bin/bash
# An admin's drain stands against a user's word. The test user's in-job job
# runs on n1 and n2; root drains n1 in Slurm ("NHC: ...") and n2 through
# sigma (sigmactl drain, "sigma: admin: ..."). The user then reports both
# as suspects (sigmactl suspect) and as slow (sigmactl slow): sigmad leaves
# both reasons as they are (slow moves the user's own job, if anything), and once the job is gone sigma's repair loop
# does not return either node to service.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
. "$SIGMA_SRCDIR/tests/cluster/sigmad-lib.sh"

NHC="NHC: ib0 link down - do not resume"
CTL=("$SIGMACTL" --config "$SIGMA_TESTBED_DIR/etc/sigma.conf")
# reason_is NODE TEXT: NODE's reason is TEXT (Slurm adds " [user@time]")
reason_is() { case "$(nreason "$1")" in "$2 ["*|"$2") return 0 ;; esac; return 1; }
sigmad_fresh
d=$(workdir admin-drain)
write_job "$d"
jid=$(cd "$d" && run_as_user sbatch --parsable -N2 -w n1,n2 --no-kill -o "$d/out" "$d/job.sh") ||
	fail "sbatch failed"
until_true 30 is_state "$jid" RUNNING || fail "job $jid not running: $(jstate "$jid")"
# the plugin's block of an in-job job, as the prolog writes it
scontrol update jobid="$jid" \
	admincomment="sigma[probe=off,spares=1,max_restarts=3,ckpt_every=10,on_warning=checkpoint,restart=in-job,job_spares=1]" ||
	fail "cannot set AdminComment"

scontrol update nodename=n1 state=drain reason="$NHC" || fail "cannot drain n1"
"${CTL[@]}" drain n2 --reason "RMA pending" >/dev/null || fail "sigmactl drain n2"
until_true 10 reason_is n2 "sigma: admin: RMA pending" || fail "n2: $(nreason n2)"
sleep 2 # sigmad has looked again

for n in n1 n2; do
	r=$(run_as_user "${CTL[@]}" suspect "$n" --job "$jid" 2>&1)
	echo "$r" | grep -q "left as it is" || fail "suspect $n: $r"
	# slow moves the user's own job, and never drains
	run_as_user "${CTL[@]}" slow "$n" --job "$jid" >/dev/null 2>&1
done
reason_is n1 "$NHC" || fail "n1's reason replaced: $(nreason n1)"
reason_is n2 "sigma: admin: RMA pending" || fail "n2's reason replaced: $(nreason n2)"
log "suspect and slow on the admins' nodes: reasons kept"

scancel "$jid"
until_true 30 sh -c "[ -z \"\$(squeue -h -j $jid 2>/dev/null)\" ]" || fail "job $jid did not end"
# longer than sigmad's repair cool-down on the testbed
sleep 20
for n in n1 n2; do
	nstate "$n" | grep -q drain || fail "$n returned to service: $(nstate "$n"): $(nreason "$n")"
done
reason_is n1 "$NHC" || fail "n1's reason replaced after the job: $(nreason n1)"
reason_is n2 "sigma: admin: RMA pending" || fail "n2's reason replaced after the job: $(nreason n2)"
[ "$(events drain "$jid")" = 0 ] || fail "sigmad drained a node for job $jid"
log "after the job: n1 and n2 still drained with the admins' reasons"
scontrol update nodename=n1,n2 state=resume
log "ok"
