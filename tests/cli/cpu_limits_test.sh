#!/usr/bin/env bash
# usage: cpu_limits_test.sh KILN_BINARY SOURCE_DIR
# kiln's default thread count inside the limits a container or taskset sets (issue 44): `kiln
# doctor --json` and `kiln bench --json` under `taskset -c 0`, with OMP_NUM_THREADS, and inside a
# real cgroup with a CPU quota of 1.5 CPUs (v2 cpu.max, or v1 cpu.cfs_quota_us; made here and
# removed after). Making a cgroup needs root and a writable cgroup tree: without them this is a
# skip (a failure under CI, tests/skip.sh).
set -u
KILN=$1
SRC=$2
source "$SRC/tests/skip.sh"
source "$SRC/tests/cli/check_lib.sh"
M=$SRC/demo/fashion_mnist_cnn.onnx
field() {  # field KEY CMD...: the cpu section's KEY of `CMD... doctor --json`
  local key=$1; shift
  "$@" "$KILN" doctor --json | /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['cpu']['$key'])"
}
threads_of_bench() {
  "$@" "$KILN" bench "$M" --batch 2 --warmup 1 --iterations 2 --json - | /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['threads'])"
}

check taskset-affinity 0 "^1$" -- bash -c "$(declare -f field); KILN='$KILN' field affinity_cpus taskset -c 0"
check taskset-default-threads 0 "^1$" -- bash -c "$(declare -f field); KILN='$KILN' field default_threads taskset -c 0"
check taskset-bench-threads 0 "^1$" -- bash -c "$(declare -f threads_of_bench); KILN='$KILN' M='$M' threads_of_bench taskset -c 0"
check taskset-doctor-text 0 "may use 1 \(affinity mask 1 CPUs" -- taskset -c 0 "$KILN" doctor
check omp-wins 0 "^3$" -- bash -c "$(declare -f field); KILN='$KILN' field default_threads env OMP_NUM_THREADS=3 taskset -c 0"
check omp-reason 0 "OMP_NUM_THREADS=3" -- env OMP_NUM_THREADS=3 "$KILN" doctor

# A real cgroup with a quota of 1.5 CPUs: kiln must use 1 thread (rounded down).
CG=""
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then  # v2
  CG=/sys/fs/cgroup/kiln-cpu-test-$$
  if mkdir "$CG" 2>/dev/null && echo "150000 100000" > "$CG/cpu.max" 2>/dev/null; then :; else
    rmdir "$CG" 2>/dev/null; CG=""; WHY="cannot make a v2 cgroup with cpu.max under /sys/fs/cgroup (not root, or the cpu controller is not delegated)"
  fi
elif [ -d /sys/fs/cgroup/cpu ]; then  # v1
  CG=/sys/fs/cgroup/cpu/kiln-cpu-test-$$
  if mkdir "$CG" 2>/dev/null && echo 100000 > "$CG/cpu.cfs_period_us" 2>/dev/null &&
     echo 150000 > "$CG/cpu.cfs_quota_us" 2>/dev/null; then :; else
    rmdir "$CG" 2>/dev/null; CG=""; WHY="cannot make a v1 cgroup under /sys/fs/cgroup/cpu (not root?)"
  fi
else
  WHY="no cgroup v2 tree nor v1 cpu controller at /sys/fs/cgroup"
fi
if [ -n "$CG" ]; then
  trap 'rmdir "$CG" 2>/dev/null' EXIT
  in_cg() { bash -c "echo \$\$ > '$CG/cgroup.procs' && exec \"\$@\"" in_cg "$@"; }
  check cgroup-quota 0 "^1.5$" -- bash -c "$(declare -f field in_cg); KILN='$KILN'; CG='$CG'; field cgroup_quota_cpus in_cg"
  check cgroup-default-threads 0 "^1$" -- bash -c "$(declare -f field in_cg); KILN='$KILN'; CG='$CG'; field default_threads in_cg"
  check cgroup-bench-threads 0 "^1$" -- bash -c "$(declare -f threads_of_bench in_cg); KILN='$KILN'; M='$M'; CG='$CG'; threads_of_bench in_cg"
  check cgroup-doctor-text 0 "cgroup quota 1.50 CPUs from /sys/fs/cgroup" -- bash -c "echo \$\$ > '$CG/cgroup.procs' && exec '$KILN' doctor"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] || exit 1
[ -n "$CG" ] || kiln_skip "$WHY"
