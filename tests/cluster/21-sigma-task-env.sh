#!/bin/bash
# A sigma job submitted by a non-root user: every task sees the SIGMA_*
# variables sigma-train reads (and no others), the checkpoint directory exists and belongs to the user, the
# prolog wrote the sigma[...] block into the AdminComment. A job without
# --sigma-* options gets none of that.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
grep -q 'sigma.so' "$SIGMA_TESTBED_DIR/etc/plugstack.conf" || skip "sigma.so not loaded"

d=$(workdir taskenv)
cat > "$d/job.sh" <<'JOB'
#!/bin/bash
#SBATCH -N2 --constraint=primary
srun bash -c 'echo "task $SLURM_PROCID $SLURMD_NODENAME dir=$SIGMA_CKPT_DIR every=$SIGMA_CKPT_EVERY probe=${SIGMA_PROBE-unset} spares=${SIGMA_SPARES-unset} restarts=${SIGMA_MAX_RESTARTS-unset} attempt=$SIGMA_ATTEMPT"; stat -c "owner=%U mode=%a" "$SIGMA_CKPT_DIR"'
JOB
jid=$(cd "$d" && run_as_user sbatch --parsable --wait -J envjob -o "$d/out-%j" \
	--sigma-probe=quick --sigma-spares=1 --sigma-max-restarts=3 --sigma-ckpt-every=50 \
	"$d/job.sh") || fail "job failed: $(cat "$d"/out-* 2>/dev/null)"
cat "$d/out-$jid"
want="dir=$SIGMA_TESTBED_DIR/ckpt/$SIGMA_TEST_USER/envjob every=50 probe=unset spares=unset restarts=unset attempt=0"
n=$(grep -cF -- "$want" "$d/out-$jid")
[ "$n" = 2 ] || fail "expected 2 tasks with '$want', got $n"
n=$(grep -c "^owner=$SIGMA_TEST_USER mode=700$" "$d/out-$jid")
[ "$n" = 2 ] || fail "checkpoint directory not owned by $SIGMA_TEST_USER with mode 700 in every task"
ac=$(scontrol show job "$jid" | sed -n 's/^ *AdminComment=//p')
[ "${ac%% *}" = "sigma[probe=quick,spares=1,max_restarts=3,ckpt_every=50,on_warning=drain-after]" ] ||
	fail "AdminComment is '$ac'"
log "job $jid: SIGMA_* in every task, directory owned by the user, AdminComment $ac"

# the user's own --sigma-ckpt-dir
jid=$(cd "$d" && run_as_user sbatch --parsable --wait -o "$d/own-%j" \
	--sigma-ckpt-dir="$d/myckpt" --wrap 'echo "dir=$SIGMA_CKPT_DIR every=$SIGMA_CKPT_EVERY"; stat -c "owner=%U" "$SIGMA_CKPT_DIR"') ||
	fail "job with --sigma-ckpt-dir failed: $(cat "$d"/own-* 2>/dev/null)"
grep -qx "dir=$d/myckpt every=100" "$d/own-$jid" || fail "own dir job: $(cat "$d/own-$jid")"
grep -qx "owner=$SIGMA_TEST_USER" "$d/own-$jid" || fail "own dir not owned by the user: $(cat "$d/own-$jid")"
log "job $jid: --sigma-ckpt-dir made by the user, defaults exported"

# not a sigma job: no variables, no block
jid=$(cd "$d" && run_as_user sbatch --parsable --wait -o "$d/plain-%j" --wrap 'env | grep -c ^SIGMA_CKPT || true') ||
	fail "plain job failed"
[ "$(cat "$d/plain-$jid")" = 0 ] || fail "a plain job saw SIGMA_CKPT_*: $(cat "$d/plain-$jid")"
ac=$(scontrol show job "$jid" | sed -n 's/^ *AdminComment=//p')
[ -z "$ac" ] || fail "a plain job got AdminComment '$ac'"
log "job $jid without --sigma-*: no SIGMA_* variables, no AdminComment"
