# shellcheck shell=bash
# contrib/testbed.d/node-cpu.sh - sourced by contrib/testbed: a CPU
# capacity per node (up --node-cpu). Each slurmd, and everything it starts
# (slurmstepd, the tasks: the testbed's proctrack/linuxproc and task/none
# never move them), runs in a cgroup v1 CPU group of its own whose CFS quota
# is the node's share of a core, so that four nodes at 0.5 share two cores
# out exactly and a slow node (0.25) is slow without freeing time for the
# others. The groups are CPU_CG_ROOT/sigma-testbed-PORT/nI, the one thing
# the testbed writes outside its state directory; `down` removes them.

CPU_CG_ROOT=${SIGMA_TESTBED_CPU_CGROUP:-/sys/fs/cgroup/cpu}
# the CFS period the quota is spread over (1000 to 1000000 us). A node
# whose quota is spent waits for the next period; at the kernel's default
# of 100 ms that wait was longer than a training step, so a node at a
# quarter of a core slowed a step 3.6 to 5 times, not 2 (docs/testbed.md)
CPU_PERIOD_US=${SIGMA_TESTBED_CPU_PERIOD_US:-10000}
NODE_CPU=""             # every node's share of a core; "" none
declare -A NODE_CPU_OF=() # nI -> its own share

node_cpu_group() { echo "$CPU_CG_ROOT/sigma-testbed-$PORT/n$1"; }

# --node-cpu F or --node-cpu nI=F: a share of a core, 0.01 to this host's
# cores, for every node or for node nI
node_cpu_arg() {
	local node=${1%%=*} f=${1#*=}
	[ "$node" = "$1" ] && node=""
	if ! [[ "$f" =~ ^[0-9]+(\.[0-9]+)?$ ]] ||
		! awk -v f="$f" -v n="$(nproc)" 'BEGIN { exit !(f >= 0.01 && f <= n) }'; then
		die "--node-cpu $1: expected a share of a core from 0.01 to $(nproc), as 0.5 or n3=0.25"
	fi
	if [ -z "$node" ]; then
		NODE_CPU=$f
	else
		[[ "$node" =~ ^n[0-9]+$ ]] || die "--node-cpu $1: expected a node as n1 to n$NNODES"
		if [ "${node#n}" -lt 1 ] || [ "${node#n}" -gt "$NNODES" ]; then
			die "--node-cpu $1: this testbed has nodes n1 to n$NNODES"
		fi
		NODE_CPU_OF[$node]=$f
	fi
}

# node i's share, "" when it has none
node_cpu_of() { echo "${NODE_CPU_OF[n$1]:-$NODE_CPU}"; }

# the controller is there and writable, before anything starts
node_cpu_check() {
	[ -n "$NODE_CPU" ] || [ "${#NODE_CPU_OF[@]}" -gt 0 ] || return 0
	if ! [[ "$CPU_PERIOD_US" =~ ^[0-9]{4,7}$ ]] || [ "$CPU_PERIOD_US" -lt 1000 ] || [ "$CPU_PERIOD_US" -gt 1000000 ]; then
		die "SIGMA_TESTBED_CPU_PERIOD_US=$CPU_PERIOD_US: expected a CFS period of 1000 to 1000000 us"
	fi
	[ -f "$CPU_CG_ROOT/cpu.cfs_quota_us" ] ||
		die "--node-cpu: no cgroup v1 CPU controller at $CPU_CG_ROOT (cpu.cfs_quota_us); set SIGMA_TESTBED_CPU_CGROUP to where it is mounted"
	mkdir -p "$CPU_CG_ROOT/sigma-testbed-$PORT" 2>/dev/null ||
		die "--node-cpu: cannot make a group under $CPU_CG_ROOT"
}

# start slurmd for node i, in its group when it has a share
node_cpu_slurmd() {
	local i=$1 f g
	f=$(node_cpu_of "$i")
	if [ -z "$f" ]; then
		slurmd -N "n$i"
		return
	fi
	g=$(node_cpu_group "$i")
	if ! mkdir -p "$g" ||
		! echo "$CPU_PERIOD_US" > "$g/cpu.cfs_period_us" ||
		! awk -v f="$f" -v p="$CPU_PERIOD_US" 'BEGIN { printf "%d\n", f * p }' > "$g/cpu.cfs_quota_us"; then
		die "--node-cpu: cannot set the quota of $g"
	fi
	# the subshell joins the group, then becomes slurmd: the daemon and all
	# it forks stay in it
	(echo "$BASHPID" > "$g/cgroup.procs" && exec slurmd -N "n$i") ||
		die "slurmd n$i did not start in $g"
}

# node-cpu nI=F on a running testbed: node nI has F of a core from now on
# (a slow node that recovers, or a node that slows down); its slurmd must
# have been started in a group (up --node-cpu)
cmd_node_cpu() {
	local spec=${1:-} node f g
	[ $# -eq 1 ] && [[ "$spec" == n*=* ]] || die "node-cpu: expected one nI=F, as n4=0.5"
	node_cpu_arg "$spec"
	node=${spec%%=*} f=${spec#*=}
	g=$(node_cpu_group "${node#n}")
	[ -f "$g/cpu.cfs_quota_us" ] ||
		die "node-cpu: $node has no CPU group (start the testbed with up --node-cpu)"
	awk -v f="$f" -v p="$(cat "$g/cpu.cfs_period_us")" 'BEGIN { printf "%d\n", f * p }' \
		> "$g/cpu.cfs_quota_us" || die "node-cpu: cannot set the quota of $g"
	echo "testbed: $node has $f of a core from now on"
}

# "0.5 cores" for status, "" without a group
node_cpu_shown() {
	local g q
	g=$(node_cpu_group "$1")
	[ -r "$g/cpu.cfs_quota_us" ] || return 0
	q=$(cat "$g/cpu.cfs_quota_us")
	[ "$q" -gt 0 ] 2>/dev/null || return 0
	awk -v q="$q" -v p="$(cat "$g/cpu.cfs_period_us")" 'BEGIN { printf ", cpu %.2f cores", q / p }'
}

# remove the groups once their processes are gone (down)
node_cpu_remove() {
	local top=$CPU_CG_ROOT/sigma-testbed-$PORT g n
	[ -d "$top" ] || return 0
	for n in $(seq 1 50); do
		for g in "$top"/n*; do
			[ -d "$g" ] && rmdir "$g" 2>/dev/null
		done
		rmdir "$top" 2>/dev/null && return 0
		sleep 0.1
	done
	echo "testbed: $top still holds processes; left in place" >&2
}
