#!/bin/bash
# sigma as a site installs it: the Debian packages (contrib/build-debs) are
# installed with dpkg -i, and the testbed runs from the installed files only
# (contrib/testbed up --installed): the plugin from Slurm's plugin
# directory, /usr/sbin/sigma-probe as the health check, sigmad started from
# its packaged systemd unit. A sigma job of the test user, run by the
# installed sigma-train through the packaged example script, loses a node to
# a probe failure: the health check drains it, sigmad requeues the job onto
# a spare, and the job completes. Then the packages are purged, and nothing
# of them is left. The testbed is brought back up from the build tree at the
# end, for the tests after this one.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
. "$SIGMA_SRCDIR/tests/cluster/sigmad-lib.sh"
. "$SIGMA_SRCDIR/tests/cluster/drill-lib.sh"

PKGS="sigma-common sigma-slurm-plugin sigma-probe sigmad sigma-client sigma-train sigma-doc
libsigma-runtime0 libsigma-runtime-dev python3-sigmatorch"
# the packages of this Slurm: contrib/build-debs's default directory
DEBS=${SIGMA_DEB_DIR:-$SIGMA_SRCDIR/_build-deb${SIGMA_SLURM_LANE:+-$SIGMA_SLURM_LANE}}
TESTBED=$SIGMA_SRCDIR/contrib/testbed
STEPS=150
for b in dpkg-buildpackage lintian; do
	command -v "$b" >/dev/null || skip "$b not installed (contrib/install-deps)"
done
[ -r "$CORPUS/fortunes" ] || skip "fortunes-min not installed"
need_srun_pmix

installed() { dpkg-query -W -f='${db:Status-Status}\n' "$1" 2>/dev/null | grep -qv '^not-installed$'; }
purge_all() {
	local p left=""
	for p in $PKGS; do installed "$p" && left="$left $p"; done
	[ -z "$left" ] || dpkg --purge $left
}
# whatever happens, the packages go and the build tree's testbed comes back
restore() {
	"$TESTBED" down >/dev/null 2>&1
	purge_all >/dev/null 2>&1
	"$TESTBED" up >/dev/null 2>&1 || echo "the build tree's testbed did not come back up" >&2
}
trap restore EXIT

if ! ls "$DEBS"/sigmad_*.deb >/dev/null 2>&1; then
	log "building the packages into $DEBS"
	"$SIGMA_SRCDIR/contrib/build-debs" "$DEBS" || fail "contrib/build-debs failed"
fi
debs=()
for p in $PKGS; do
	f=$(ls "$DEBS/${p}_"*.deb 2>/dev/null | head -n 1)
	[ -n "$f" ] || fail "no package $p in $DEBS"
	debs+=("$f")
done

# a package left by an earlier, interrupted run would hide what dpkg -i does
purge_all > /dev/null
files=$(mktemp)
for f in "${debs[@]}"; do
	dpkg-deb --fsys-tarfile "$f" | tar -tf - | grep -v '/$' | sed 's|^\.||'
done | sort -u > "$files"
log "installing $(echo "${debs[@]##*/}")"
dpkg -i "${debs[@]}" || fail "dpkg -i failed"

# what the packages set up on install
[ "$(stat -c '%U %a' /var/lib/sigma/sigmad)" = "root 700" ] ||
	fail "sigmad's state directory: $(stat -c '%U %a' /var/lib/sigma/sigmad 2>&1)"
dpkg-query -W -f='${Conffiles}\n' sigma-common | grep -q ' /etc/sigma/sigma.conf ' ||
	fail "/etc/sigma/sigma.conf is not a conffile of sigma-common"
dpkg-query -W -f='${Conffiles}\n' sigma-slurm-plugin | grep -q ' /etc/slurm/plugstack.conf.d/sigma.conf ' ||
	fail "the plugstack.conf.d snippet is not a conffile"
grep -q '^required' /etc/slurm/plugstack.conf.d/sigma.conf && fail "the plugstack snippet is not shipped disabled"
[ -e /etc/systemd/system/multi-user.target.wants/sigmad.service ] && fail "sigmad.service was enabled on install"
so=$(dpkg-query -L sigma-slurm-plugin | grep '/sigma\.so$')
[ -f "$(dirname "$so")/select_cons_tres.so" ] || fail "sigma.so is not in Slurm's plugin directory: $so"
log "installed: plugin $so, conffiles, state directory root 700, unit not enabled"
# the runtime library as a program and a Python script find it
pkg-config --exists sigma-runtime || fail "pkg-config does not know sigma-runtime"
# (and its guard, straggler detection and checkpoints reach the installed
# library)
ckdir=$(mktemp -d)
code=$(env -u SIGMA_RUNTIME_LIB -u PYTHONPATH /usr/bin/python3 -c '
import sys, numpy, sigmatorch
g = sigmatorch.Guard(recompute=False)
s = sigmatorch.Straggler(world_size=2, rank=0, escalate="off")
c = sigmatorch.Checkpoint(sys.argv[1], run="r", rank=0)
c.save(3, {"w": numpy.arange(4, dtype=numpy.float32)})
w = numpy.zeros(4, dtype=numpy.float32)
c.load(c.steps()[0], {"w": w})
print(sigmatorch.EXIT_PEER, g.check(1, float("nan"), 1.0).cause,
      s.record(1, [0.1, 0.1]), c.steps(), w.tolist())' "$ckdir") ||
	fail "the installed sigmatorch does not import or run"
rm -rf "$ckdir"
[ "$code" = "76 non-finite [] [3] [0.0, 1.0, 2.0, 3.0]" ] ||
	fail "the installed sigmatorch says: $code"
log "installed: libsigma-runtime (pkg-config), sigmatorch imports, its guard, straggler detection and checkpoints run"

"$TESTBED" down >/dev/null 2>&1
"$TESTBED" up --installed || fail "testbed up --installed failed"
eval "$("$TESTBED" env)"
grep -q "^required $so " "$SIGMA_TESTBED_DIR/etc/plugstack.conf" || fail "the plugin is not loaded from $so"
grep -q "^exec '/usr/sbin/sigma-probe'" "$SIGMA_TESTBED_DIR/lib/sigma-healthcheck" ||
	fail "the health check is not the installed probe"
pid=$(cat /run/sigma/sigmad.pid) || fail "no /run/sigma/sigmad.pid"
[ "$(readlink "/proc/$pid/exe")" = /usr/sbin/sigmad ] || fail "sigmad $pid is $(readlink "/proc/$pid/exe")"
[ -S /run/sigma/sigmad.sock ] || fail "sigmad has no socket at /run/sigma/sigmad.sock"
[ -f /var/lib/sigma/sigmad/events.jsonl ] || fail "sigmad keeps no event log in /var/lib/sigma/sigmad"

# the job: the installed trainer, launcher, sigmactl and example script
TRAIN=/usr/bin/sigma-train PROBE=/usr/sbin/sigma-probe SIGMACTL=/usr/bin/sigmactl
LAUNCHER=/usr/bin/sigma-launch EXAMPLE=/usr/share/doc/sigma-train/examples/train-moe.sbatch
SIGMAD_EVENTS=/var/lib/sigma/sigmad/events.jsonl
until_true 20 sh -c '[ "$(scontrol show hostnames "$(scontrol show reservation sigma_spares 2>/dev/null | sed -n "s/^ *Nodes=\([^ ]*\).*/\1/p")" 2>/dev/null | tr "\n" ,)" = n5,n6, ]' ||
	fail "the installed sigmad did not reserve n5,n6: $(scontrol show reservation 2>&1)"
d=$(workdir installed)
run_as_user "$TRAIN" prepare --train-out "$d/train.tok" --val-out "$d/val.tok" \
	"$CORPUS/fortunes" "$CORPUS/literature" "$CORPUS/riddles" >/dev/null || fail "prepare failed"
: > "$d/marks"
jid=$(drill_submit inst 3 "$STEPS") || exit 1
out=$d/inst.out
until_true 120 at_step "$out" 20 0 || fail "job $jid does not train: $(tail -n 5 "$out")"
bad=$(job_nodes "$jid" | sed -n 2p)
drill_inject "$bad" ecc_uncorrected=2
log "probe failure injected on $bad at step $(last_step "$out")"
until_true 40 sh -c "scontrol show node $bad | grep -q 'Reason=sigma: probe'" ||
	fail "$bad not drained by the installed health check: $(nreason "$bad")"
log "$bad drained: $(nreason "$bad")"
until_true 120 started "$out" 1 || fail "job not requeued: $(jstate "$jid"); $(tail -n 3 "$SIGMA_TESTBED_DIR/log/sigmad.log")"
until_true 240 drill_ended "$jid" || fail "job $jid did not end: $(jstate "$jid")"
is_state "$jid" COMPLETED || fail "job $jid ended $(jstate "$jid"): $(tail -n 5 "$out")"
grep -q "^done: $STEPS steps" "$out" || fail "the run did not finish: $(tail -n 5 "$out")"
ac=$(jfield_all "$jid" AdminComment)
echo "$ac" | grep -q "sigma: attempt 2: $bad .* -> requeued onto n[56]" || fail "AdminComment: $ac"
sinfo -R -h -N -o '%N %E' | grep -q "^$bad sigma: probe" || fail "sinfo -R: $(sinfo -R)"
"$SIGMACTL" --config "$SIGMA_CONF" history --job "$jid" | grep -q "complete *job $jid attempt 2" ||
	fail "sigmactl history: $("$SIGMACTL" --config "$SIGMA_CONF" history --job "$jid" 2>&1)"
log "job $jid completed after the requeue: $ac"

# purge: every file of the packages, their configuration and their state go
"$TESTBED" down >/dev/null 2>&1
dpkg --purge $PKGS || fail "dpkg --purge failed"
for p in $PKGS; do installed "$p" && fail "$p still known to dpkg after the purge"; done
left=$(while read -r f; do [ -e "$f" ] || [ -L "$f" ] && echo "$f"; done < "$files")
[ -z "$left" ] || fail "files left after the purge: $left"
for f in /etc/sigma /var/lib/sigma /run/sigma /etc/slurm/plugstack.conf.d/sigma.conf; do
	[ -e "$f" ] && fail "left after the purge: $f ($(ls -la "$f" 2>&1 | head -n 5))"
done
log "purged: none of the $(wc -l < "$files") files, no /etc/sigma, /var/lib/sigma or /run/sigma left"
rm -f "$files"
log "ok"
