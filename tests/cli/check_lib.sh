# Shared by the CLI test scripts: `check NAME EXPECTED_RC GREP_PATTERN -- command...` runs the
# command, expects its exit code and an extended-regex match in its output, and counts the result
# in $passed / $failed.
passed=0; failed=0
check() {
  local name=$1 want_rc=$2 pattern=$3; shift 4
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" -eq "$want_rc" ] && grep -qE -- "$pattern" <<< "$out"; then
    passed=$((passed + 1)); echo "PASS $name"
  else
    failed=$((failed + 1)); echo "FAIL $name: rc=$rc (want $want_rc), pattern '$pattern' in:"; echo "$out" | sed 's/^/    /'
  fi
}
