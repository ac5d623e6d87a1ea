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
    // A use after free: ASan's alone (an out-of-bounds store was seen first by UBSan's
    // object-size check under GCC, so the ASan canary did not show ASan stopping anything).
    int* p = static_cast<int*>(std::malloc(4 * sizeof(int)));
    std::free(p);
    volatile int* q = p;
    q[1] = 1;  // heap-use-after-free
  } else {
    std::fprintf(stderr, "usage: sanitizer_canary ubsan|asan\n");
    return 2;
  }
  std::printf("no report: the sanitizer did not stop the program\n");
  return 0;
}
