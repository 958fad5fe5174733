//===- Lowering.h - High-level ops to buffers -------------------*- C++ -*-===//
//
// `lower` turns each high-level op into a BufferNode (pointwise ops and
// reductions), a MultiTemplateBufferNode (matmul, custom ops) or a
// CollectiveMultiTemplateBufferNode (collectives, collective custom ops).
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_LOWERING_LOWERING_H
#define MTSCHED_LOWERING_LOWERING_H

#include "mtsched/Lowering/ChoiceConfig.h"
#include "mtsched/Passes/Pass.h"
#include <memory>

namespace mtsched {

/// V1 (immediate) decides every node right after lowering, in graph order,
/// before fusion (the autotuner's `lower` step, createImmediateLowerPass);
/// V2 (deferred) leaves the choice to the scheduler.
enum class CollectiveMode { Deferred, Immediate };
llvm::StringRef collectiveModeName(CollectiveMode M);

struct LoweringOptions {
  ChoiceConfig Choices = ChoiceConfig::getDefault();
  CollectiveMode Mode = CollectiveMode::Deferred;
};

/// How a custom op is classified: collective (with its kind) or not.
struct CustomOpClass {
  bool IsCollective = false;
  CollectiveKind Kind = CollectiveKind::None;
};
/// An op is collective when its name or any config's name names a
/// collective; the kind comes from the op name first, then the configs.
CustomOpClass classifyCustomOp(llvm::StringRef Name,
                               llvm::ArrayRef<Choice> Configs);

/// The process group an op runs on: its `group` attribute, else
/// `process_group`, else the world group.
std::string processGroupOf(const AttrDict &Attrs);

/// Lowers every op of a graph; it decides nothing, in either mode.
std::unique_ptr<Pass> createLowerPass(const LoweringOptions &Opts);

} // namespace mtsched

#endif // MTSCHED_LOWERING_LOWERING_H
