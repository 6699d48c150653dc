#!/bin/bash
# test_gpu_check.sh - contrib/gpu-check's dry run, with the CPU standing in
# for the GPU (SIGMA_GPU_FAKE=cpu): the verdict table and its exit code, the
# logs kept under $OUT, the stop on a driver too old for the toolkit, and
# each check seen to fail: a kernel out of tolerance, a step 1 away from the
# CPU's, a second run that is not bitwise the first, a sanitizer that
# overruns its cap. Uses the sigma-train of this build.
set -uo pipefail

SRC=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
BLD=${top_builddir:-$SRC/_build}
CHECK=$SRC/contrib/gpu-check
[ -x "$BLD/trainer/sigma-train" ] || {
	echo "skip: no $BLD/trainer/sigma-train"
	exit 77
}
T=$(mktemp -d "${TMPDIR:-/tmp}/test-gpu-check.XXXXXX")
trap 'rm -rf "$T"' EXIT
FAILS=0

bad() {
	echo "FAIL: $*"
	FAILS=$((FAILS + 1))
}
# expect NAME PATTERN FILE: a line of FILE matches PATTERN (ERE)
expect() { grep -qE -- "$2" "$3" || bad "$1: no line matching '$2' in $3"; }

# a kernel test that prints what test_kernels_cuda prints
cat > "$T/ktest" << 'EOF'
#!/bin/sh
line() { printf 'cuda-vs-cpu %-4s %-24s %-6s max rel err %.3e (tol %.0e)%s\n' "$@"; }
echo "test_kernels_cuda: cuda: a fake device"
line fp32 matmul_forward out 1.2e-07 2e-05 ""
line fp32 "attention(fused) T70 Dh32" dq 3.4e-07 2e-05 ""
line fp32 "attention(fused) T1024 Dh128" dq 6.0e-07 2e-05 ""
if [ -n "${KTEST_BAD:-}" ]; then
	line fp32 moe_router_backward dp 4.0e-03 2e-05 "  FAIL"
	exit 1
fi
line bf16 matmul_forward out 2.0e-03 1e-02 ""
echo "test_kernels_cuda: worst rel err fp32 6.000e-07 (tol 2e-05), bf16 matmul 2.000e-03 (tol 1e-02)"
EOF
# a sanitizer that runs the test, and hangs for synccheck
cat > "$T/sanitizer" << 'EOF'
#!/bin/sh
[ "$2" = synccheck ] && exec sleep 60
shift 4
"$@" > /dev/null
echo "========= ERROR SUMMARY: 0 errors"
EOF
chmod +x "$T/ktest" "$T/sanitizer"

# run NAME [VAR=VALUE...]: the dry run, its output in $T/NAME.out, its
# logs in $T/NAME/gpu-check; sets RC
run() {
	local name=$1
	shift
	mkdir -p "$T/$name"
	RC=0
	env OUT="$T/$name" SIGMA_GPU_FAKE=cpu SIGMA_GPU_SKIP=build \
		SIGMA_GPU_STEPS=3 SIGMA_GPU_SAN_CAP=8 OMP_NUM_THREADS=1 \
		SIGMA_GPU_KTEST="$T/ktest" SIGMA_GPU_SANITIZER="$T/sanitizer" \
		"$@" "$CHECK" "$BLD" > "$T/$name.out" 2>&1 || RC=$?
}

# 1. everything passes; the table says what each check found
run pass
out=$T/pass.out
[ "$RC" = 0 ] || bad "pass: exit $RC, expected 0"
expect pass '^driver +info +driver fake \(CUDA [0-9]+\.[0-9]\), runtime' "$out"
expect pass '^gpu +info +NVIDIA H200 NVL .*bf16 peak 835 TFLOP/s' "$out"
expect pass '^kernels +pass +4 comparisons' "$out"
expect pass '^  fp32 attention\(fused\) +pass +max rel err 6.000e-07 \(tol 2e-05\)' "$out"
expect pass '^  bf16 matmul_forward +pass' "$out"
expect pass '^memcheck +pass' "$out"
expect pass '^initcheck +pass' "$out"
expect pass '^synccheck +info +incomplete: stopped after [0-9]+ s' "$out"
expect pass '^step1-fp32 +pass +gpu32 vs cpu at step 1: loss [0-9.]+ vs [0-9.]+ \(rel 0.000e\+00\), grad norm' "$out"
expect pass '^step1-bf16 +pass' "$out"
expect pass '^repeat +pass +cuda:fp32 twice: metrics' "$out"
expect pass '^tput-cublas +info +tokens/s [0-9.]+, MFU [0-9.]+% of 835' "$out"
expect pass '^tput-att-agree +pass' "$out"
expect pass '^result +PASS' "$out"
# the logs and the table stay under $OUT; data and checkpoints do not
for f in verdict.txt versions.txt kernels.log san-memcheck.log cpu.csv \
	gpu32.log gpu32b.csv big-fused.csv; do
	[ -s "$T/pass/gpu-check/$f" ] || bad "pass: no $f under \$OUT/gpu-check"
done
ls "$T"/pass/gpu-check/*.tok "$T"/pass/gpu-check/ckpt-* > /dev/null 2>&1 &&
	bad "pass: token files or checkpoints left under \$OUT"
expect pass '^result +PASS' "$T/pass/gpu-check/verdict.txt"

# 2. a driver too old for the toolkit: stop first, say what to do
run olddriver SIGMA_GPU_FAKE_DRIVER=12040
out=$T/olddriver.out
[ "$RC" = 2 ] || bad "olddriver: exit $RC, expected 2"
expect olddriver 'STOP: the NVIDIA driver .* runs CUDA 12.4 at most' "$out"
expect olddriver 'R580' "$out"
expect olddriver '^driver +FAIL +.*cudaErrorInsufficientDriver' "$out"
grep -q '^kernels' "$out" && bad "olddriver: went on after the driver check"

# 3. each check fails when what it checks is wrong: fails NAME VAR=VALUE
# SKIP ROW-PATTERN...: the run exits 1 and its table has every row
fails() {
	local name=$1 var=$2 skip=$3 p
	shift 3
	run "$name" "$var" SIGMA_GPU_SKIP="$skip"
	[ "$RC" = 1 ] || bad "$name: exit $RC, expected 1"
	for p in "$@"; do
		expect "$name" "$p" "$T/$name.out"
	done
}
fails badkernel KTEST_BAD=1 "build sanitizer train throughput" \
	'^kernels +FAIL' \
	'^  fp32 moe_router_backward +FAIL +max rel err 4.000e-03' \
	'^  fp32 matmul_forward +pass'
fails step1 "SIGMA_GPU_FAKE_SKEW=gpu32:--aux-coef 0.02" \
	"build kernels throughput" '^step1-fp32 +FAIL' '^step1-bf16 +pass'
fails repeat "SIGMA_GPU_FAKE_SKEW=gpu32b:--clip 0.5" \
	"build kernels throughput" '^repeat +FAIL +cuda:fp32 twice: ' \
	'^step1-fp32 +pass'
fails attagree "SIGMA_GPU_FAKE_SKEW=big-fused:--aux-coef 0.5" \
	"build kernels train" \
	'^tput-att-agree +FAIL +big-fused vs big-cublas at step 1'

if [ "$FAILS" != 0 ]; then
	for f in "$T"/*.out; do
		echo "---- $f"
		cat "$f"
	done
	exit 1
fi
echo "test_gpu_check: all dry runs as expected"
