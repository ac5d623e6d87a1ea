// What kiln's own layers may do with a Session beyond the public API (include/kiln/session.h):
// build one over an in-memory graph, without serializing it. The INT8 quantizer (src/quant/) runs
// its calibration, bias-correction and candidate models this way.
#pragma once

#include <memory>

#include "ir/graph.h"
#include "kiln/session.h"
#include "kiln/status.h"

namespace kiln {

struct SessionAccess {
  // A session over a copy of `graph` (constants are shared, not copied; the optimizer works on
  // the copy). The weights are not shared with other sessions (there is no file to key them by).
  static StatusOr<std::unique_ptr<Session>> LoadFromGraph(const ir::Graph& graph,
                                                          const SessionOptions& options);
  // The same over `graph` itself, moved in: for a graph built only to be run, no copy is made.
  static StatusOr<std::unique_ptr<Session>> LoadFromGraph(ir::Graph&& graph,
                                                          const SessionOptions& options);
};

}  // namespace kiln
