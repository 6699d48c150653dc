#!/bin/bash
# A user cannot have a node drained at will (sigmactl suspect). The test
# user's in-job job runs on n1 and n2 (n3 its in-allocation spare), with
# the launcher told to call a node a suspect after one crash
# (SIGMA_SUSPECT_CRASHES=1, the user's own setting). Its ranks keep the job
# protocol's records (docs/job-protocol.md); the rank on n1 prints srun's
# failure text naming n2 on its stderr, then crashes, and the rank on n2
# leaves as one that lost its peer:
#   - the launcher blames n1, whose rank left no exit record, not the
#     framed n2: it reads no message text;
#   - sigmad probes n1 first (healthy), then refuses to drain it: Slurm's
#     accounting holds 1 failed step of the job there, and sigmad drains
#     at 3 (sigmad_suspect_crashes);
#   - the user's own suspect of n2, on which no crash was ever seen but in
#     that failed step, is probed and refused the same way, the verdict
#     in sigmad's history;
#   - with the victim's job running on n1 too, the user's suspect of n1 is
#     refused for that alone.
# No node is drained.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
. "$SIGMA_SRCDIR/tests/cluster/sigmad-lib.sh"
grep -q '^required' "$SIGMA_TESTBED_DIR/etc/plugstack.conf" 2>/dev/null || skip "the plugin is not loaded"

LAUNCHER=$SIGMA_BUILDDIR/trainer/sigma-launch
CTL=("$SIGMACTL" --config "$SIGMA_TESTBED_DIR/etc/sigma.conf")
sigmad_fresh
d=$(workdir suspect-verified)
chown "$SIGMA_TEST_USER" "$d"
cat > "$d/step.sh" <<'STEP'
#!/bin/bash
# this rank's record of the job protocol (docs/job-protocol.md)
record() {
	local r=$SIGMA_JOB_RECORDS/rank-$SLURM_PROCID t=$SIGMA_JOB_RECORDS/.rank-$SLURM_PROCID.tmp
	[ -n "${SIGMA_JOB_RECORDS:-}" ] || return 0
	echo "sigma-job 1 rank=$SLURM_PROCID node=$SLURMD_NODENAME launch=${SIGMA_LAUNCH:-0} step=0 state=$1 code=$2" > "$t" &&
		mv -f "$t" "$r"
}
record start -1
# launch 0: the rank on the first node frames the second, then crashes;
# the other leaves as a rank that lost its peer does. Launch 1 waits to
# be cancelled
if [ "${SIGMA_LAUNCH:-0}" = 0 ]; then
	if [ "$SLURM_PROCID" = 0 ]; then
		other=$(scontrol show hostnames "$SLURM_STEP_NODELIST" | sed -n 2p)
		echo "srun: error: $other: task 1: Exited with exit code 1" >&2
		sleep 1
		kill -SEGV $$
	fi
	trap 'record exit 76; exit 76' TERM
	sleep 60 &
	wait $!
fi
echo "launch $SIGMA_LAUNCH on $(hostname -s) $SLURMD_NODENAME"
sleep 120
STEP
chmod 755 "$d/step.sh"
jid=$(cd "$d" && run_as_user sbatch --parsable -N3 -w n1,n2,n3 --no-kill \
	--sigma-restart=in-job --sigma-job-spares=1 --sigma-max-restarts=3 --sigma-probe=off \
	-o "$d/out" --export="ALL,SIGMA_SUSPECT_CRASHES=1,SIGMA_PROBE=$PROBE,SIGMACTL=$SIGMACTL,SIGMA_CONF=$SIGMA_TESTBED_DIR/etc/sigma.conf" \
	--wrap "$LAUNCHER -- $d/step.sh") || fail "sbatch failed"
trap 'scancel "$jid" ${vid:+"$vid"} 2>/dev/null' EXIT
# sigmad's verdict on the launcher's suspect report (which names the node),
# after its probe of the node
until_true 120 sh -c "grep -q '^sigma-launch: sigmactl: .*node n[12]: refused\\|^sigma-launch: sigmactl: ok: n[12] drained' '$d/out' 2>/dev/null" ||
	fail "no verdict of sigmad on the launcher's suspect: $(grep sigma-launch "$d/out")"
grep -q "^sigma-launch: the rank on n1 died" "$d/out" ||
	fail "the launcher did not blame n1: $(grep sigma-launch "$d/out")"
grep -q "^sigma-launch: the rank on n2 died" "$d/out" && fail "the launcher blamed the framed n2"
grep -q "^srun: error: n2: task 1: Exited with exit code 1" "$d/out" ||
	fail "the rank's own text did not reach the job's output as it was printed"
grep -q "^sigma-launch: sigmactl: verdict: probe exit 0 (.*): error: job $jid, node n1: refused: Slurm records 1 failed steps of the job on n1, sigmad drains at 3" "$d/out" ||
	fail "sigmad's verdict: $(grep 'sigma-launch: sigmactl' "$d/out")"
# asked again, at once on the count after the healthy probe: the same
until_true 30 grep -q "^sigma-launch: sigmactl: sigmactl: job $jid, node n1: refused: Slurm records 1 failed steps of the job on n1, sigmad drains at 3" "$d/out" ||
	fail "sigmad's answer to the report again: $(grep 'sigma-launch: sigmactl' "$d/out")"
log "the rank framed n2; the launcher blamed n1; sigmad refused: $(grep -o 'Slurm records.*' "$d/out")"

r=$(run_as_user "${CTL[@]}" suspect n2 --job "$jid" 2>&1) || fail "suspect n2: $r"
echo "$r" | grep -q "node n2: sigmad probes it first" || fail "suspect n2: $r"
# verdict NODE: sigmad's verdict on the job's report of NODE, as the user
# sees it in the history
verdict() {
	run_as_user "${CTL[@]}" history --job "$jid" --json |
		grep '"type":"suspect"' | grep "\"node\":\"$1\""
}
until_true 60 verdict n2 || fail "no verdict on n2 in the user's history: $(run_as_user "${CTL[@]}" history --job "$jid" --json)"
v=$(verdict n2)
echo "$v" | grep -q '"verdict":"refused".*refused: Slurm records 1 failed steps of the job on n2' || fail "the verdict on n2: $v"

vid=$(run_as_victim sbatch --parsable -w n1 -n1 -o /dev/null --wrap "sleep 120") || fail "the victim's sbatch failed"
until_true 30 is_state "$vid" RUNNING || fail "the victim's job $vid not running: $(jstate "$vid")"
r=$(run_as_user "${CTL[@]}" suspect n1 --job "$jid" 2>&1) && fail "suspect n1 taken: $r"
echo "$r" | grep -q "refused: job $vid of another user runs on n1" || fail "suspect n1 beside the victim: $r"
log "suspect n2 (no crash of its own) and n1 (shared with job $vid) refused"

for n in n1 n2 n3; do
	nstate "$n" | grep -q drain && fail "$n drained: $(nreason "$n")"
done
[ "$(events drain "$jid")" = 0 ] || fail "sigmad logged a drain for job $jid"
log "ok"
