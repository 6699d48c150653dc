#!/bin/bash
# No client of sigmad's socket can stall its loop. As the non-root test
# user, 50 connections that send nothing and one that drips a byte every
# 1.9 s (each reconnecting as soon as sigmad drops it) are held open while
# a probe failure on a training node must get the job onto a spare as
# usual. The recovery time with and without the attack is printed; both
# must be within the 30 s of test 31, and an admin's sigmactl still
# answers during the attack.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
. "$SIGMA_SRCDIR/tests/cluster/sigmad-lib.sh"
command -v python3 >/dev/null || skip "python3 not installed"

SOCK=$SIGMA_TESTBED_DIR/run/sigmad.sock
d=$(workdir sigmad-attack)
cat > "$d/attack.py" <<'PY'
import socket, sys, threading, time
path, idle = sys.argv[1], int(sys.argv[2])
def hold(drip):
    while True:
        try:
            s = socket.socket(socket.AF_UNIX)
            s.connect(path)
            while True:
                if drip:
                    s.send(b"s")
                    time.sleep(1.9)
                elif s.recv(1) == b"":
                    break
        except OSError:
            pass
        time.sleep(0.05)
for i in range(idle):
    threading.Thread(target=hold, args=(False,), daemon=True).start()
threading.Thread(target=hold, args=(True,), daemon=True).start()
print("attacking", flush=True)
while True:
    time.sleep(60)
PY
chmod 644 "$d/attack.py"

# recover: a 4-node job, a probe failure on n3; prints seconds from the
# drain to the job running again on a spare
recover() {
	local jid t0
	sigmad_fresh
	jid=$(submit_sigma "$d")
	job_on "$jid" n3 || fail "job $jid is not on n3"
	echo "ecc_uncorrected=2" > "$SIGMA_TESTBED_DIR/inject/n3"
	until_true 40 sh -c 'scontrol show node n3 | grep -q "Reason=sigma: probe"' ||
		fail "n3 not drained by the probe: $(nreason n3)"
	t0=$(date +%s)
	until_true 60 running_without "$jid" n3 ||
		fail "job $jid not running without n3 60 s after the drain: $(jstate "$jid") $(jfield "$jid" NodeList)"
	echo $(( $(date +%s) - t0 ))
	case "$(job_nodes "$jid" | tr '\n' ' ')" in *n5*|*n6*) ;; *) fail "job $jid not on a spare" ;; esac
	rm -f "$SIGMA_TESTBED_DIR/inject/n3"
	scancel "$jid"
	until_true 30 sh -c "[ -z \"\$(squeue -h -j $jid 2>/dev/null)\" ]" || fail "job $jid not ended"
	scontrol update nodename=n3 state=resume
	until_true 30 sh -c '! sinfo -h -n n3 -o %t | grep -q drain' || fail "n3 not resumed"
}

quiet=$(recover) || exit 1
log "without the attack: job on a spare ${quiet}s after the drain"

sigmad_fresh
run_as_user python3 "$d/attack.py" "$SOCK" 50 > "$d/attack.out" 2>&1 &
apid=$!
trap 'pkill -u "$SIGMA_TEST_USER" -f attack.py 2>/dev/null; kill $apid 2>/dev/null' EXIT
until_true 10 grep -q attacking "$d/attack.out" || fail "attack did not start: $(cat "$d/attack.out")"
sleep 3
conns=$(ss -x 2>/dev/null | grep -c "$SOCK" || true)
log "attack running: $conns socket entries on $SOCK"
t0=$(date +%s)
out=$(timeout 10 "$SIGMACTL" --config "$SIGMA_TESTBED_DIR/etc/sigma.conf" status 2>&1) ||
	fail "sigmactl status as root did not answer during the attack: $out"
log "sigmactl status as root answered in $(( $(date +%s) - t0 ))s"
attacked=$(recover) || exit 1
log "with 50 idle connections and a slow drip: job on a spare ${attacked}s after the drain"
echo "recovery without the attack ${quiet}s, with it ${attacked}s"
[ "$attacked" -le 30 ] || fail "the attack delayed recovery to ${attacked}s"
