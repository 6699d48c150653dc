#!/bin/bash
# Failures that come together (a switch, a rack): two sigma jobs whose
# nodes are drained in the same health-check pass get a spare each. Both
# used to be decided onto the same spare: the second pended on Resources
# while the other spare stayed in the reservation, and its AdminComment
# said it had been moved onto the first.
. "$SIGMA_SRCDIR/tests/cluster/lib.sh"
. "$SIGMA_SRCDIR/tests/cluster/sigmad-lib.sh"

sigmad_fresh
d=$(workdir sigmad-together)
a=$(submit_one "$d" ja)
b=$(submit_one "$d" jb)
na=$(jfield "$a" NodeList)
nb=$(jfield "$b" NodeList)
fill=""
for n in n1 n2 n3 n4; do
	[ "$n" = "$na" ] || [ "$n" = "$nb" ] || fill="$fill $(filler "$n")"
done
log "jobs $a on $na, $b on $nb; fillers$fill on the other primaries"
scontrol update nodename="$na,$nb" state=drain reason='sigma: probe quick: host compute=fail' ||
	fail "cannot drain $na,$nb"
log "$na and $nb drained in one pass"
until_true 40 sh -c "[ \"\$(squeue -h -t R -j $a,$b -o %N | sort | tr '\n' ,)\" = n5,n6, ]" ||
	fail "not one spare each 40 s later: $a $(jstate "$a") on $(jfield "$a" NodeList) ($(jfield "$a" Reason)), $b $(jstate "$b") on $(jfield "$b" NodeList) ($(jfield "$b" Reason))"
log "job $a on $(jfield "$a" NodeList), job $b on $(jfield "$b" NodeList)"
for j in $a $b; do
	n=$(jfield "$j" NodeList)
	until_true 15 sh -c "scontrol show job $j | grep -q 'AdminComment=.*requeued onto $n'" ||
		fail "job $j runs on $n, its AdminComment says: $(jfield "$j" AdminComment)"
done
scancel "$a" "$b" $fill
