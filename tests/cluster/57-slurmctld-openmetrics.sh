#!/bin/bash
# slurmctld's own OpenMetrics endpoints (Slurm 25.11 and later, with
# MetricsType=metrics/openmetrics, which the testbed sets there) and
# sigma's metrics say the same of the same nodes: no family name is
# exported by both, every sigma family is named sigma_*, and a node that
# sigma's probe drains is drained in slurmctld's figures as well (a
# dashboard that shows both never shows two stories).
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
command -v python3 >/dev/null || skip "python3 not installed"
# SIGMA_TESTBED_SLURM: the release, MAJOR * 100 + MINOR (contrib/testbed)
[ "${SIGMA_TESTBED_SLURM:-0}" -ge 2511 ] ||
	skip "Slurm $(slurmctld -V | awk '{ print $2 }'): slurmctld exports OpenMetrics from 25.11 on"
port=$(scontrol show config | sed -n 's/^SlurmctldPort *= *\([0-9]*\).*/\1/p')
[ -n "$port" ] || fail "no SlurmctldPort in scontrol show config"
d=$(workdir slurmctld-openmetrics)
m=$SIGMA_TESTBED_DIR/metrics

# fetch NAME: slurmctld's /metrics/NAME into $d/NAME.prom
fetch() {
	python3 - "http://127.0.0.1:$port/metrics/$1" "$d/$1.prom" <<'PY'
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=10) as r:
    open(sys.argv[2], "wb").write(r.read())
PY
}
# drained: the nodes with the drain flag in $d/nodes.prom (slurm_nodes_drain;
# slurm_nodes_drained and _draining split it by whether jobs still run)
drained() {
	awk '$1 == "slurm_nodes_drain" { n = $2 } END { print n + 0 }' "$d/nodes.prom"
}

for e in nodes jobs partitions scheduler; do
	fetch "$e" || fail "slurmctld answers no /metrics/$e on port $port (MetricsType: $(scontrol show config | grep -i '^MetricsType'))"
done
log "slurmctld exports $(cat "$d"/*.prom | grep -c '^# TYPE') families on /metrics/{nodes,jobs,partitions,scheduler}"
grep -q '^slurm_nodes_drain ' "$d/nodes.prom" || fail "no slurm_nodes_drain in /metrics/nodes: $(grep -v '^#' "$d/nodes.prom" | head -5)"
before=$(drained)

until_true 30 test -s "$m/sigmad.prom" || fail "sigmad wrote no $m/sigmad.prom"
"$SIGMA_BUILDDIR/sbin/sigma-probe" --config "$SIGMA_TESTBED_DIR/etc/sigma.conf" \
	--node n1 --metrics "$d/probe.prom" quick > "$d/probe.out" 2>&1 ||
	fail "sigma-probe quick failed: $(tail -3 "$d/probe.out")"
cp "$m/sigmad.prom" "$d/sigmad.prom"
python3 - "$d" <<'PY' || fail "slurmctld's and sigma's metric names collide (above)"
import glob, os, re, sys
def families(paths):
    out = set()
    for p in paths:
        for line in open(p):
            m = re.match(r"# TYPE (\S+) ", line)
            if m:
                out.add(m.group(1))
    return out
d = sys.argv[1]
ours = families([os.path.join(d, f) for f in ("sigmad.prom", "probe.prom")])
slurm = families([p for p in glob.glob(os.path.join(d, "*.prom"))
                  if os.path.basename(p) not in ("sigmad.prom", "probe.prom")])
bad = sorted(n for n in ours if not n.startswith("sigma_"))
both = sorted(ours & slurm)
print("sigma exports %d families, slurmctld %d; in both: %s; not sigma_*: %s"
      % (len(ours), len(slurm), ", ".join(both) or "none", ", ".join(bad) or "none"))
sys.exit(1 if both or bad or not ours or not slurm else 0)
PY

# sigma's probe drains n2; slurmctld's own figures show one more drained node
inj=$SIGMA_TESTBED_DIR/inject/n2
trap 'rm -f "$inj"' EXIT
printf 'memtest=fail\n' > "$inj"
chmod 644 "$inj"
"$SIGMA_BUILDDIR/sbin/sigma-probe" --config "$SIGMA_TESTBED_DIR/etc/sigma.conf" \
	--node n2 --drain full > "$d/probe-n2.out" 2>&1 &&
	fail "the probe passed n2 with memtest=fail injected: $(tail -3 "$d/probe-n2.out")"
until_true 20 sh -c "scontrol show node n2 | grep -q 'Reason=sigma: '" ||
	fail "the probe did not drain n2: $(sinfo -h -n n2 -o '%t %E')"
until_true 20 bash -c "$(declare -f fetch drained); port=$port d=$d; fetch nodes && [ \"\$(drained)\" = $((before + 1)) ]" ||
	fail "slurmctld's /metrics/nodes shows $(drained) drained nodes after sigma drained n2, not $((before + 1)): $(grep -i drain "$d/nodes.prom")"
log "n2 drained by sigma's probe ($(nreason n2)); slurmctld's drained count $before -> $(drained)"
log "ok"
