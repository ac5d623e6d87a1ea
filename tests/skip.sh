# Sourced by the test scripts that can skip: the policy of tests/pyenv/check_venv.py's skip() for
# shell. `kiln_skip REASON` prints "SKIP: REASON" and exits 77 (CTest: not run); under CI
# (CI=true, or KILN_REQUIRE_ALL=1, which .ci/run sets) it prints a FAIL line and exits 1 instead,
# so a green CI run means every check ran.
kiln_require_all() {
  [ "${KILN_REQUIRE_ALL:-}" = 1 ] || [ "${CI:-}" = true ]
}
kiln_skip() {
  if kiln_require_all; then
    echo "FAIL: this check would skip, and under CI (KILN_REQUIRE_ALL=1 or CI=true) a skip is a failure: $*"
    exit 1
  fi
  echo "SKIP: $*"
  exit 77
}
