// A program with one deliberate bug per sanitizer, chosen by its argument, built with the
// sanitizer flags of the build it sits in (KILN_SANITIZE). The `sanitizer_canary_*` tests and
// scripts/fuzz.sh run it with UBSAN_OPTIONS and ASAN_OPTIONS cleared and require it to die with a
// sanitizer report: it shows that a finding fails the run by the build's own flags, not only when
// an environment variable happens to say so. Exits 0 ("no report") only if the bug went unseen.
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) {
  const char* what = argc > 1 ? argv[1] : "";
  volatile int big = INT_MAX;
  if (std::strcmp(what, "ubsan") == 0) {
    int sum = big + argc;  // signed overflow: UBSan's "runtime error"
    std::printf("sum %d\n", sum);
  } else if (std::strcmp(what, "asan") == 0) {
    int* p = static_cast<int*>(std::malloc(4 * sizeof(int)));
    volatile int i = 4;
    p[i] = 1;  // heap-buffer-overflow
    std::free(p);
  } else {
    std::fprintf(stderr, "usage: sanitizer_canary ubsan|asan\n");
    return 2;
  }
  std::printf("no report: the sanitizer did not stop the program\n");
  return 0;
}
