#!/bin/bash
# sigma-launch's state cannot be planted by another user. The test user
# plants, for the next job ids, files at the launcher's old predictable
# name in the shared /tmp: a count that says the restarts are spent, and a
# link to a file of the victim's. The victim's in-job job runs without a
# checkpoint directory (a site without ckpt_root); its step fails once
# (exit 76) on healthy nodes. The launcher must relaunch it (its own count,
# not the planted one), and leave the linked file as it was.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
. "$SIGMA_SRCDIR/tests/cluster/sigmad-lib.sh"
grep -q '^required' "$SIGMA_TESTBED_DIR/etc/plugstack.conf" 2>/dev/null || skip "the plugin is not loaded"

LAUNCHER=$SIGMA_BUILDDIR/trainer/sigma-launch
v=$(workdir launch-victim)
run_as_victim true
chown "$SIGMA_VICTIM_USER" "$v"
run_as_victim sh -c "echo precious > '$v/precious'"
next=$(scontrol show config | sed -n 's/^NEXT_JOB_ID *= *//p')
[ -n "$next" ] || fail "no NEXT_JOB_ID"
planted=()
for id in $(seq "$next" $((next + 4))); do
	run_as_user sh -c "echo '0 99' > /tmp/sigma-launch-$id" || fail "cannot plant /tmp/sigma-launch-$id"
	run_as_user ln -sf "$v/precious" "/tmp/sigma-launch-$id.tmp" 2>/dev/null
	planted+=("/tmp/sigma-launch-$id" "/tmp/sigma-launch-$id.tmp")
done
trap 'rm -f "${planted[@]}"' EXIT

cat > "$v/step.sh" <<'STEP'
#!/bin/sh
# the first launch fails as if a peer died; the relaunch succeeds
[ "${SIGMA_LAUNCH:-0}" = 0 ] && { echo "launch 0 fails"; exit 76; }
echo "launch ${SIGMA_LAUNCH} done"
STEP
chmod 755 "$v/step.sh"
chown "$SIGMA_VICTIM_USER" "$v/step.sh"
jid=$(cd "$v" && run_as_victim sbatch --parsable -N2 --no-kill --sigma-restart=in-job \
	--sigma-job-spares=1 --sigma-max-restarts=2 --sigma-probe=off -o "$v/out" \
	--export="ALL,SIGMA_PROBE=$PROBE,SIGMACTL=$SIGMACTL,SIGMA_CONF=$SIGMA_TESTBED_DIR/etc/sigma.conf" \
	--wrap "env -u SIGMA_CKPT_DIR $LAUNCHER -- $v/step.sh") || fail "sbatch failed"
[ "$jid" -ge "$next" ] && [ "$jid" -le $((next + 4)) ] || fail "job $jid is not one of the planted ids $next-$((next + 4))"
until_true 90 sh -c "[ -z \"\$(squeue -h -j $jid 2>/dev/null)\" ]" || fail "job $jid did not end: $(tail -n 5 "$v/out")"
grep -q "not relaunched: max_restarts" "$v/out" && fail "the launcher took the planted count: $(grep sigma-launch "$v/out")"
grep -q "^launch 1 done" "$v/out" || fail "the step was not relaunched: $(cat "$v/out")"
[ "$(cat "$v/precious")" = precious ] || fail "the victim's file was written through the planted link: $(cat "$v/precious")"
[ "$(cat "/tmp/sigma-launch-$jid")" = "0 99" ] || fail "the launcher wrote the planted file"
log "job $jid relaunched with its own count; the planted files untouched"
log "ok"
