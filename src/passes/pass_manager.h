// The graph optimizer's driver: runs kiln's passes over a loaded graph, in a fixed order, to a
// fixed point. Called by Session at load when SessionOptions::optimize is set.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "kiln/options.h"
#include "kiln/status.h"

namespace kiln::passes {

// The default pass names, in the order they run.
std::vector<std::string> DefaultPassNames();

// Runs the default passes except those named in options.disabled_passes (InvalidArgument for a
// name that is no pass), repeating the sequence until no pass changes the graph (at most a few
// rounds). `log` (optional) receives one line per change: "pass <name>: <what changed>".
Status RunDefaultPasses(ir::Graph& graph, const SessionOptions& options,
                        std::vector<std::string>* log);

}  // namespace kiln::passes
