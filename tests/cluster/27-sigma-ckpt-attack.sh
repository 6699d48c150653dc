#!/bin/bash
# A user cannot make root hand over directories under ckpt_root. As the
# non-root test user:
#   --sigma-ckpt-dir=ROOT/./x     would have root chown ckpt_root itself
#   --sigma-ckpt-dir=ROOT/OTHER/x would have root make OTHER's directory,
#                                 owned by the attacker (name squatting)
#   --sigma-ckpt-dir=ROOT/root/x  would have root chown an existing
#                                 root-owned directory that holds only files
# Each is refused at submit with a message naming the option and the rule;
# afterwards ckpt_root, ROOT/root and the absent ROOT/OTHER are as they were,
# and no node is drained. The user's own ckpt_root/USER/x still works.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
grep -q 'sigma.so' "$SIGMA_TESTBED_DIR/etc/plugstack.conf" || skip "sigma.so not loaded"

R=$SIGMA_TESTBED_DIR/ckpt
d=$(workdir ckptattack)
other=sigmavictim$$
mkdir -p "$R/root"
touch "$R/root/only-files-here"
rm -rf "${R:?}/$other"
trap 'rm -f "$R/root/only-files-here"; rm -rf "${R:?}/$other"' EXIT
owner() { stat -c %U "$1"; }
[ "$(owner "$R")" = root ] || fail "setup: $R owned by $(owner "$R")"

# attack NAME DIR RULE: submitting with --sigma-ckpt-dir=DIR is refused and
# the refusal names the option and RULE
attack() {
	local name=$1 dir=$2 rule=$3 out rc=0
	out=$(cd "$d" && run_as_user sbatch --parsable -J "$name" -w n1 \
		--sigma-ckpt-dir="$dir" -o /dev/null --wrap 'true' 2>&1) || rc=$?
	if [ "$rc" = 0 ]; then
		# accepted: let the prolog run, so that what it does shows
		until_true 60 sh -c "[ -z \"\$(squeue -h -j $out 2>/dev/null)\" ]" || true
		fail "$name: --sigma-ckpt-dir=$dir was accepted (job $out)"
	fi
	case "$out" in
	*sigma-ckpt-dir*"$rule"*) ;;
	*) fail "$name: refusal does not name the option and '$rule': $out" ;;
	esac
	log "$name: refused: $(echo "$out" | grep sigma | head -1)"
}

attack dot "$R/./x" "'.'"
attack dotdot "$R/$SIGMA_TEST_USER/../$other/x" "'..'"
attack empty "$R//x" "empty component"
attack squat "$R/$other/x" "own directory $R/$SIGMA_TEST_USER"
attack rootdir "$R/root/x" "own directory $R/$SIGMA_TEST_USER"
attack root "$R" "own directory $R/$SIGMA_TEST_USER"

[ "$(owner "$R")" = root ] || fail "ckpt_root $R now owned by $(owner "$R")"
[ "$(owner "$R/root")" = root ] || fail "$R/root now owned by $(owner "$R/root")"
[ ! -e "$R/$other" ] || fail "$R/$other was created, owned by $(owner "$R/$other")"
for n in n1; do
	case "$(nstate $n)" in
	drain* | drng) fail "$n drained: $(nreason $n)" ;;
	esac
done

# the legitimate use: the user's own subtree, made as the user
jid=$(cd "$d" && run_as_user sbatch --parsable --wait -J ckown -w n1 \
	--sigma-ckpt-dir="$R/$SIGMA_TEST_USER/own/deep" -o "$d/own-%j" \
	--wrap 'touch "$SIGMA_CKPT_DIR/f"') || fail "a job in the user's own subtree failed"
[ "$(owner "$R/$SIGMA_TEST_USER/own/deep/f")" = "$SIGMA_TEST_USER" ] ||
	fail "own subtree not the user's"
log "job $jid: $R/$SIGMA_TEST_USER/own/deep made as $SIGMA_TEST_USER"
