# contrib/demo.d/torch.sh - the story of contrib/demo torch, sourced by
# contrib/demo once the testbed is up (n1-n3 for jobs, n4-n5 in sigmad's
# pool): the PyTorch example (contrib/examples/torch-moe/train.sbatch) as a
# 3-node sigma job, two ranks under sigma-launch and the third node as the
# in-allocation spare, with a snapshot every step beside the job's output.
# While it trains the demo
#   1. injects an early warning on a training node: the probe drains it,
#      sigmad signals the job, every rank writes its snapshot and leaves
#      with 75, and sigmad requeues the job onto a pool spare, where it
#      resumes after the step it stopped at;
#   2. fails another training node (its rank killed, its readings a hard
#      failure): sigma-launch relaunches the step at once onto the
#      in-allocation spare, which resumes from the newest snapshot;
#   3. lets training finish.
# Then the story as Slurm and sigma recorded it, and each recovery's time
# from the fault to the first new step with the steps it lost.
# Uses contrib/demo's SRC, B, D, STEPS, work, stage, say, stamp, die,
# until_true, inject, jstate, trains, job_spares, launches and tell_story;
# sets jid and out.

PY=/usr/bin/python3
EX=$SRC/contrib/examples/torch-moe
W=$(( STEPS / 6 ))
[ "$W" -ge 40 ] || die "SIGMA_DEMO_STEPS must be at least 240 for the torch demo (two failures fit in the run)"

stage "prepare a text corpus"
F=/usr/share/games/fortunes
cat "$F/fortunes" "$SRC"/README "$SRC"/docs/pytorch.md 2>/dev/null > "$work/data/corpus.txt"
chmod 644 "$work/data/corpus.txt"
say "$(wc -c < "$work/data/corpus.txt") bytes of text in $work/data/corpus.txt"

stage "submit a 3-node PyTorch job ($STEPS steps on 2 ranks, 1 in-allocation spare, a snapshot every step, 1 pool spare per requeue)"
cd "$work"
env="ALL,MOE_DATA=$work/data/corpus.txt,MOE_STEPS=$STEPS,MOE_CKPT_DIR=$work/torch-moe-ckpt,MOE_EXAMPLE_DIR=$EX"
env="$env,SIGMA_PYTHON=$PY,PYTHONPATH=$SRC/python,PYTHONDONTWRITEBYTECODE=1,SIGMA_RUNTIME_LIB=$B/lib/.libs/libsigma-runtime.so.0"
env="$env,SIGMA_LAUNCHER=$B/trainer/sigma-launch,SIGMA_PROBE=$B/sbin/sigma-probe,SIGMACTL=$B/sbin/sigmactl,SIGMA_CONF=$D/etc/sigma.conf"
env="$env,MOE_ARGS=--batch 4 --seq 16 --warmup 4 --log-every 1"
jid=$(sbatch --parsable -N3 --no-kill --sigma-restart=in-job --sigma-job-spares=1 \
	--export="$env" -o "$work/torch-moe-%j.out" "$EX/train.sbatch")
out=$work/torch-moe-$jid.out
say "sbatch -N3 --no-kill --sigma-restart=in-job --sigma-job-spares=1 contrib/examples/torch-moe/train.sbatch: job $jid (the script asks for --sigma-spares=1 --sigma-max-restarts=3 --sigma-on-warning=checkpoint)"

last_step() { sed -n 's/^step \([0-9]*\) .*/\1/p' "$out" 2>/dev/null | tail -n 1; }
at_step() { [ "$(last_step)" -ge "$1" ] 2>/dev/null; }
resumed() { sed -n 's/^sigmatorch: resumed after step \([0-9]*\)$/\1/p' "$out" | tail -n 1; }
# rank_pid NODE: the job's rank there, of the processes Slurm counts as
# the job's on NODE (every slurmd runs on this machine)
rank_pid() {
	local p
	for p in $(scontrol listpids "$jid" "$1" 2>/dev/null | awk 'NR > 1 { print $1 }'); do
		tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | grep -q "^$PY .*train_sigma\.py" &&
			{ echo "$p"; return 0; }
	done
	return 1
}
ROWS=()
# row WHAT T_FAULT FROM_LINE LAST_STEP: once a step follows line FROM_LINE,
# the time since T_FAULT and the steps lost (done before the fault, done
# again after it)
row() {
	local r
	until_true 240 sh -c "sed -n '$3,\$p' '$out' | grep -q '^step '" || die "no step after the recovery"
	r=$(resumed)
	ROWS+=("$(printf '%-52s %8.1f %6d' "$1" "$(awk -v a="$2" -v b="$(stamp)" 'BEGIN { print b - a }')" \
		$(( $4 > ${r:-0} ? $4 - ${r:-0} : 0 )))")
}

until_true 300 at_step 1 || die "the job does not train"
say "training on $(trains | paste -sd,), in-allocation spare $(job_spares | paste -sd,): $(grep '^step ' "$out" | tail -n 1)"

stage "1. early warning on a node: the probe drains it, sigmad has the job snapshot and exit 75, and requeues it onto a pool spare"
until_true 600 at_step "$W" || die "no step $W"
warn_node=$(trains | sed -n 2p)
at=$(last_step)
tf=$(stamp)
inject "$warn_node" ecc_corrected_rate=40
say "injected ecc_corrected_rate=40 on $warn_node at step $at"
until_true 30 sh -c "sinfo -h -R -n $warn_node | grep -q sigma" &&
	say "$warn_node: $(sinfo -h -n "$warn_node" -o '%T: %E')"
until_true 240 sh -c "grep -q '^attempt 1 on ' '$out'" || die "the job did not move"
stopped=$(sed -n 's/.*stopped after step \([0-9]*\) on request.*/\1/p' "$out" | head -n 1)
row "warning move: requeued onto a pool spare" "$tf" "$(grep -n '^attempt 1 on ' "$out" | cut -d: -f1)" "${stopped:-$at}"
say "$(grep -m1 'stopped after step' "$out" || true)"
say "running again on $(trains | paste -sd,), $(grep '^sigmatorch: resumed' "$out" | tail -n 1)"

stage "2. a training node fails: sigma-launch relaunches the step on the in-allocation spare"
r1=$(resumed)
until_true 600 at_step $(( ${r1:-0} + W )) || die "no progress after the move"
spare=$(job_spares | head -n 1)
fail_node=$(trains | sed -n 2p)
pid=
for i in $(seq 60); do
	pid=$(rank_pid "$fail_node") && break
	sleep 0.5
done
[ -n "$pid" ] || die "no rank of job $jid on $fail_node in 30 s"
n0=$(launches)
at=$(last_step)
tf=$(stamp)
inject "$fail_node" compute=fail ecc_uncorrected=2
kill -KILL "$pid"
say "killed the rank on $fail_node (pid $pid) at step $at; injected compute=fail ecc_uncorrected=2"
until_true 240 sh -c "[ \$(grep -c '^sigma-launch: launch ' '$out') -gt $n0 ]" ||
	die "the step was not relaunched"
grep -q '^attempt 2 on ' "$out" && die "the job was requeued, not relaunched in its allocation"
row "node failure: relaunched on the in-allocation spare" "$tf" "$(grep -n '^sigma-launch: launch ' "$out" | tail -n 1 | cut -d: -f1)" "$at"
grep '^sigma-launch: ' "$out" | tail -n 3 | sed 's/^/    /'
say "relaunched on $spare in place of $fail_node, $(grep '^sigmatorch: resumed' "$out" | tail -n 1)"

stage "3. training goes on to step $STEPS"
until_true $(( STEPS * 2 )) sh -c "grep -q '^rank 0 done: ' '$out'" || die "training did not finish"
until_true 60 sh -c "! squeue -h -j $jid | grep -q ." || true
say "$(grep '^rank 0 done: ' "$out")"
say "job $jid: $(jstate)"

tell_story

stage "recovery timings"
printf '%-52s %8s %6s\n' "recovery" "fault to" "steps"
printf '%-52s %8s %6s\n' "" "1st step" "lost"
printf '%s\n' "${ROWS[@]}"

cat <<EOF

Done in $(( $(date +%s) - T0 )) s. The cluster is still running, with the
drained nodes as sigma left them (sigmad probes them again after a cool-down;
the injected faults in $D/inject keep them out until removed). Explore it:
    eval "\$($SRC/contrib/testbed env)"; sinfo -R; sacct -D -X; $B/sbin/sigmactl --config $D/etc/sigma.conf history
Job output $out, snapshots in $work/torch-moe-ckpt.
To stop it:
    $SRC/contrib/testbed down
EOF
