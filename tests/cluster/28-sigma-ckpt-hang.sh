#!/bin/bash
# A checkpoint directory on a hung file system fails the job, not the
# node: the user names a path below a mount that never answers (what a hung
# NFS or FUSE server looks like). The prolog's child is killed at the
# plugin's ckpt_timeout (5 s on the testbed), the prolog ends, the job's
# tasks are refused with the reason, and the node is not drained.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
grep -q 'sigma.so' "$SIGMA_TESTBED_DIR/etc/plugstack.conf" || skip "sigma.so not loaded"
HANGFS=$SIGMA_BUILDDIR/tests/cluster/hangfs
[ -x "$HANGFS" ] || skip "tests/cluster/hangfs not built"
[ -c /dev/fuse ] || skip "no /dev/fuse"

d=$(workdir ckpthang)
mnt=$d/hang
mkdir "$mnt"
"$HANGFS" "$mnt" > "$d/hangfs.out" 2>&1 &
hpid=$!
trap 'kill $hpid 2>/dev/null; wait $hpid 2>/dev/null; umount -l "$mnt" 2>/dev/null' EXIT
until_true 5 grep -q mounted "$d/hangfs.out" ||
	skip "cannot mount a FUSE file system here: $(cat "$d/hangfs.out")"
timeout 2 stat "$mnt/x" >/dev/null 2>&1 && fail "setup: $mnt answers"

timeouts() { grep -h "no answer within 5 s" "$SIGMA_TESTBED_DIR"/log/slurmd-n1.log | wc -l; }
before=$(timeouts)
t0=$(date +%s)
rc=0
jid=$(cd "$d" && timeout 120 runuser -u "$SIGMA_TEST_USER" -- env SLURM_CONF="$SLURM_CONF" \
	PATH="$PATH" sbatch --parsable --wait -J hang -w n1 --sigma-ckpt-dir="$mnt/x" \
	-o "$d/hang-%j" --wrap 'srun true; echo reached') || rc=$?
secs=$(( $(date +%s) - t0 ))
[ "$rc" = 124 ] && fail "the job did not end within 120 s: the prolog hangs on $mnt"
[ "$rc" = 0 ] && fail "job $jid with a hung checkpoint directory succeeded"
log "job $jid ended (sbatch exit $rc) after ${secs}s: $(sacct -n -X -P -o state,exitcode -j "$jid")"
[ "$(timeouts)" -gt "$before" ] || fail "slurmd log does not name the hung directory"
log "slurmd: $(grep -h "no answer within 5 s" "$SIGMA_TESTBED_DIR"/log/slurmd-n1.log | tail -1)"
case "$(nstate n1)" in
drain* | drng) fail "n1 was drained by a user's hung mount: $(nreason n1)" ;;
esac
grep -q reached "$d/hang-$jid" 2>/dev/null && fail "the job's script ran on with no checkpoint directory"
log "n1 is $(nstate n1)"
