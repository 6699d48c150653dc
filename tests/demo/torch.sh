# tests/demo/torch.sh - the checks of contrib/demo torch's story, sourced
# by tests/demo/run torch (its LOG, STEPS, D, work, fail and told_in_order):
#   - the two recoveries and the end, in the order the demo tells them: a
#     warning moved by sigmad onto a pool spare, a failed node's rank
#     relaunched onto the in-allocation spare; training to the last step
#     and the job COMPLETED;
#   - the job's own lines: every rank stopped at one step on the warning
#     and the requeued job resumed after it, a relaunch resumed no more
#     than two steps behind the kill;
#   - the accounts: the AdminComment and sigmactl history tell the move
#     for the warned node and the relaunch for the failed one;
#   - the timings table: a row each, a time and no more than two steps lost.
jid=$(sed -n 's/.*contrib\/examples\/torch-moe\/train.sbatch: job \([0-9]*\) .*/\1/p' "$LOG" | head -n 1)
[ -n "$jid" ] || fail "no job id in the demo's output"
out=$work/torch-moe-$jid.out
grep -q "^rank 0 done: step $STEPS " "$out" || fail "training did not reach step $STEPS: $(tail -n 3 "$out")"
grep -q "^  \[ *[0-9]*s\] job $jid: COMPLETED" "$LOG" || fail "job $jid did not complete: $(grep "job $jid:" "$LOG")"
told_in_order "the two recoveries and the end" 'injected ecc_corrected_rate=40 on' \
	'relaunched on n[0-9]* in place of' '^==== .* 3\. training goes on'
warn=$(sed -n 's/.*injected ecc_corrected_rate=40 on \(n[0-9]*\) .*/\1/p' "$LOG")
failn=$(sed -n 's/.*relaunched on n[0-9]* in place of \(n[0-9]*\),.*/\1/p' "$LOG")
[ -n "$warn" ] && [ -n "$failn" ] && [ "$warn" != "$failn" ] || fail "nodes not named: warning '$warn', relaunch '$failn'"
echo "story: warning on $warn, relaunch off $failn"

# the job's lines: one stop step, resumed after it; the relaunch close behind
stops=$(sed -n 's/.*stopped after step \([0-9]*\) on request: exit 75/\1/p' "$out" | sort -u)
[ "$(echo "$stops" | wc -w)" = 1 ] || fail "the ranks did not stop at one step: $stops"
mapfile -t res < <(sed -n 's/^sigmatorch: resumed after step \([0-9]*\)$/\1/p' "$out")
[ "${#res[@]}" -ge 2 ] || fail "not resumed twice: ${res[*]}"
[ "${res[0]}" = "$stops" ] || fail "the requeued job resumed after step ${res[0]}, the ranks stopped at $stops"
killed=$(sed -n 's/.*killed the rank on n[0-9]* (pid [0-9]*) at step \([0-9]*\);.*/\1/p' "$LOG")
[ -n "$killed" ] && [ "${res[-1]}" -ge $((killed - 2)) ] ||
	fail "the relaunch resumed after step ${res[-1]}, the kill was at step ${killed:-?}"

# the accounts
ac=$(scontrol show job "$jid" | sed -n 's/^ *AdminComment=//p')
echo "$ac" | grep -q "sigma: attempt [0-9]*: $warn warning .* -> checkpointed, requeued onto n[0-9]*" ||
	fail "AdminComment does not tell the move off $warn: $ac"
echo "$ac" | grep -q "sigma: attempt [0-9]*: $failn [^>]*-> relaunched in the allocation" ||
	fail "AdminComment does not tell the relaunch off $failn: $ac"
hist=$("$B/sbin/sigmactl" --config "$D/etc/sigma.conf" history --job "$jid")
echo "$hist" | grep -q "requeue .* $warn spares n[0-9]*" || fail "sigmactl history has no requeue off $warn: $hist"
echo "$hist" | grep -q "relaunch .* $failn: relaunched in its allocation" || fail "sigmactl history has no relaunch off $failn: $hist"

# the timings table
rows=$(sed -n '/^==== .* recovery timings/,/^Done in/p' "$LOG" | grep -E '^(warning move|node failure)')
[ "$(echo "$rows" | grep -c .)" = 2 ] || fail "the timings table does not have its two rows: $rows"
echo "$rows" | awk '{ lost = $NF; t = $(NF - 1); if (t !~ /^[0-9]+\.[0-9]$/ || t <= 0 || lost > 2) exit 1 }' ||
	fail "a timing row out of bounds: $rows"
echo "$rows" | sed 's/^/timing: /'
echo "PASS: tests/demo/run torch"
