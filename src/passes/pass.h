// Pass: one graph rewrite of kiln's optimizer, run at load on the ir::Graph before the runtime
// builds a model from it (src/runtime/session.cc; the order is in pass_manager.cc).
//
// Contract: Run() returns whether it changed the graph. A pass rewrites only what it fully
// understands and leaves every other case alone; it keeps ir::Graph's invariants (value names
// unique and indexed, each value produced at most once, Value::producer right, nodes in
// topological order, graph input and output names unchanged) and the graph's results within
// float rounding. An error is a bug or an unrecoverable inconsistency, never "not applicable".
// Passes hold no state between runs and are not thread-safe (they mutate the graph).
#pragma once

#include <memory>
#include <string>

#include "ir/graph.h"
#include "kiln/status.h"

namespace kiln::passes {

class Pass {
 public:
  virtual ~Pass() = default;
  // The name used in logs and SessionOptions::disabled_passes, e.g. "fuse_conv_bn".
  virtual std::string name() const = 0;
  virtual StatusOr<bool> Run(ir::Graph& graph) = 0;
  // One line on what the last Run() changed ("fused 16 Conv+Add"), empty when nothing.
  const std::string& summary() const { return summary_; }

 protected:
  std::string summary_;
};

// The passes, one per file.
std::unique_ptr<Pass> MakeExpandQLinearPass();       // expand_qlinear.cc
std::unique_ptr<Pass> MakeEliminateIdentityPass();   // eliminate_identity.cc
std::unique_ptr<Pass> MakeFoldConstantsPass();       // fold_constants.cc
std::unique_ptr<Pass> MakeFuseConvBnPass();          // fuse_conv_bn.cc
std::unique_ptr<Pass> MakeFuseConvAddPass();         // fuse_conv_add.cc
std::unique_ptr<Pass> MakeFuseConvActivationPass();  // fuse_conv_activation.cc
std::unique_ptr<Pass> MakeFuseBnActivationPass();    // fuse_bn_activation.cc
std::unique_ptr<Pass> MakeFuseMatMulAddPass();       // fuse_matmul_add.cc
std::unique_ptr<Pass> MakeFuseLayerNormPass();       // fuse_layernorm.cc
std::unique_ptr<Pass> MakeFuseGeluPass();            // fuse_gelu.cc
std::unique_ptr<Pass> MakeQdqInt8ToUint8Pass();      // qdq_int8_to_uint8.cc
std::unique_ptr<Pass> MakeFuseQdqConvPass();         // fuse_qdq_conv.cc
std::unique_ptr<Pass> MakeFuseQdqMatMulPass();       // fuse_qdq_matmul.cc
std::unique_ptr<Pass> MakeFuseQdqAddPass();          // fuse_qdq_add.cc
std::unique_ptr<Pass> MakeFuseQConvAddPass();        // fuse_qconv_add.cc
std::unique_ptr<Pass> MakeFuseQConvDwPass();         // fuse_qconv_dw.cc
std::unique_ptr<Pass> MakeReduceMeanToPoolPass();    // reduce_mean_to_pool.cc

}  // namespace kiln::passes
