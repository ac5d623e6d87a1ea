// What libkiln.so / libkiln.a add to the layers they are made of (src/CMakeLists.txt): the
// library's own version, for programs that check it against the headers they were built with.
#include "kiln/version.h"

#ifndef KILN_VERSION_STRING
#error "KILN_VERSION_STRING is set by src/CMakeLists.txt"
#endif

namespace kiln {

const char* LibraryVersion() { return KILN_VERSION_STRING; }

}  // namespace kiln
