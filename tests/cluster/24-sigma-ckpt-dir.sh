#!/bin/bash
# The checkpoint directory is created as the job's user, never as root
# through a user's link: a symbolic link the user planted at the job's
# checkpoint path is refused (the job's tasks fail, saying why), nothing is
# created at the link's target, and the node is not drained.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
grep -q 'sigma.so' "$SIGMA_TESTBED_DIR/etc/plugstack.conf" || skip "sigma.so not loaded"

d=$(workdir ckptdir)
# a good job first: its directory exists and belongs to the user
jid=$(cd "$d" && run_as_user sbatch --parsable --wait -J ckgood -w n1 --sigma-ckpt-every=5 \
	-o "$d/good-%j" --wrap 'touch "$SIGMA_CKPT_DIR/step5"; echo ok') || fail "good job failed"
dir=$SIGMA_TESTBED_DIR/ckpt/$SIGMA_TEST_USER/ckgood
[ "$(stat -c %U "$dir")" = "$SIGMA_TEST_USER" ] || fail "$dir owned by $(stat -c %U "$dir")"
[ "$(stat -c %U "$dir/step5")" = "$SIGMA_TEST_USER" ] || fail "file written as $(stat -c %U "$dir/step5")"
[ "$(stat -c %U "$(dirname "$dir")")" = "$SIGMA_TEST_USER" ] || fail "the user's directory is not the user's"
log "job $jid: $dir owned by $SIGMA_TEST_USER"

# the user plants a link where the next job's directory will be
target=$d/target
planted=$SIGMA_TESTBED_DIR/ckpt/$SIGMA_TEST_USER/planted
trap 'rm -f "$planted"' EXIT
rm -rf "$planted"
refusals() { grep -h "checkpoint directory refused: $planted is a symbolic link" "$SIGMA_TESTBED_DIR"/log/slurmd-n1.log | wc -l; }
before=$(refusals)
run_as_user mkdir "$target"
run_as_user ln -s "$target" "$planted"
jid=$(cd "$d" && run_as_user sbatch --parsable --wait -J planted -w n1 --sigma-ckpt-every=5 \
	-o "$d/bad-%j" --wrap 'srun true; echo reached') && fail "job $jid with a planted link succeeded"
jid=$(squeue -h -o %i -n planted 2>/dev/null | head -1)
[ -z "$jid" ] || fail "job still queued"
jid=$(sacct -n -X -P -o jobid -S now-5minutes --name planted | tail -1)
log "job $jid: $(sacct -n -X -P -o state,exitcode -j "$jid")"
[ -z "$(ls -A "$target")" ] || fail "something was created through the link: $(ls -A "$target")"
[ -L "$planted" ] || fail "the link was replaced"
[ "$(refusals)" -gt "$before" ] ||
	fail "slurmd log does not say the link was refused"
log "refused: $(grep -h "checkpoint directory refused: $planted" "$SIGMA_TESTBED_DIR"/log/slurmd-n1.log | tail -1)"
case "$(nstate n1)" in
drain* | drng) fail "n1 was drained by a user's link: $(nreason n1)" ;;
esac
