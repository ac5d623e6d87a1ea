// ir::Graph -> a serialized ModelProto: the way back out of kiln's IR, for what rewrites a model
// and writes it for other runtimes (the INT8 quantizer's QDQ models, src/quant/).
//
// What the IR keeps is written: opset imports, the model's descriptive fields and metadata,
// graph inputs and outputs with their types and shapes (symbolic dims by name), every constant as
// an initializer (embedded: external data is read in, not referenced), nodes in the graph's order
// with their attributes (subgraphs recursively, outer-scope reads by name). What the loader does
// not keep is not written: value_info of intermediate tensors, attribute order, doc strings of
// nodes. An attribute of a kind the IR does not hold (sparse tensors, lists of tensors or graphs)
// makes the model unwritable: Unsupported naming the node and attribute. Models are limited to
// protobuf's 2 GiB. Stateless; thread-safe.
#pragma once

#include <string>

#include "ir/graph.h"
#include "kiln/status.h"

namespace kiln::onnxio {

StatusOr<std::string> SerializeModel(const ir::Graph& graph);

}  // namespace kiln::onnxio
