#!/bin/bash
# The Prometheus textfiles and the Grafana dashboard agree: sigmad writes
# sigmad_metrics_dir/sigmad.prom (the testbed sets it), sigma-probe writes
# its --metrics file, sigma-train rank 0 its --metrics-textfile (a short
# run under srun), promtool accepts all three, and every metric that
# contrib/grafana/sigma.json queries is a family one of them exports (a
# renamed metric would leave a panel empty without a word).
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
need_train
command -v python3 >/dev/null || skip "python3 not installed"
grep -q '^sigmad_metrics_dir=' "$SIGMA_TESTBED_DIR/etc/sigma.conf" ||
	skip "the testbed's sigma.conf has no sigmad_metrics_dir (restart the testbed)"

d=$(workdir metrics-dashboard)
m=$SIGMA_TESTBED_DIR/metrics
until_true 30 test -s "$m/sigmad.prom" || fail "sigmad wrote no $m/sigmad.prom: $(ls -l "$m")"
"$SIGMA_BUILDDIR/sbin/sigma-probe" --config "$SIGMA_TESTBED_DIR/etc/sigma.conf" \
	--node n1 --metrics "$d/probe.prom" quick > "$d/probe.out" 2>&1 ||
	fail "sigma-probe quick failed: $(tail -3 "$d/probe.out")"
cp "$m/sigmad.prom" "$d/sigmad.prom"
"$TRAIN" prepare --train-out "$d/train.tok" --val-out "$d/val.tok" "$F/fortunes" >/dev/null ||
	fail "prepare failed"
timeout 120 srun --mpi=pmix -N2 -n2 "$TRAIN" --train "$d/train.tok" --preset small \
	--batch 4 --steps 4 --warmup 1 --threads 1 --log-every 2 --eval-every 0 \
	--dp 2 --metrics-textfile "$d/train.prom" > "$d/train.out" 2>&1 ||
	fail "sigma-train failed: $(tail -3 "$d/train.out")"
if command -v promtool >/dev/null; then
	for f in sigmad probe train; do
		promtool check metrics < "$d/$f.prom" > "$d/$f.promtool" 2>&1 ||
			fail "promtool rejects $f.prom: $(cat "$d/$f.promtool")"
	done
	log "promtool accepts sigmad.prom, probe.prom and train.prom"
fi
python3 - "$SIGMA_SRCDIR/contrib/grafana/sigma.json" "$d/sigmad.prom" "$d/probe.prom" \
	"$d/train.prom" <<'PY' ||
import json, re, sys
dash = json.load(open(sys.argv[1]))
exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
used = {n for e in exprs for n in re.findall(r"\bsigma_[a-z_]+", e)}
families = set()
for f in sys.argv[2:]:
    for line in open(f):
        m = re.match(r"# TYPE (\S+) (\S+)", line)
        if m:
            families.add(m.group(1))
def family(n):
    for s in ("_bucket", "_sum", "_count"):
        if n.endswith(s) and n[: -len(s)] in families:
            return n[: -len(s)]
    return n
missing = sorted(n for n in used if family(n) not in families)
print("the dashboard's %d panels query %d metrics; the textfiles export %d families"
      % (len(dash["panels"]), len(used), len(families)))
if not used or missing:
    print("not exported:", ", ".join(missing) or "(the dashboard queries nothing)")
    sys.exit(1)
PY
	fail "the dashboard queries metrics no textfile exports"
log "ok"
