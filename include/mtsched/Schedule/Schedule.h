//===- Schedule.h - Kernel order and the collective list --------*- C++ -*-===//
//
// The scheduler's view of a graph: kernels (a multi-template buffer with its
// fused epilogue, a fused group of buffers, or a single node) with their
// read/write dependencies, in a deterministic topological order where ties
// go to the kernel whose first node comes first in program order.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_SCHEDULE_SCHEDULE_H
#define MTSCHED_SCHEDULE_SCHEDULE_H

#include "mtsched/IR/Graph.h"
#include "mtsched/Passes/Pass.h"
#include <memory>
#include <vector>

namespace mtsched {

struct ScheduledKernel {
  /// Nodes in program order; for a template kernel the template comes first,
  /// then its fused epilogue.
  std::vector<const Node *> Nodes;
  /// The kernels this one reads from, as indices into Schedule::Kernels.
  std::vector<unsigned> Deps;

  const Node *getLeader() const { return Nodes.front(); }
};

struct Schedule {
  /// In execution order.
  std::vector<ScheduledKernel> Kernels;
  /// Collective nodes in execution order: the autotuner's pre-sync list.
  std::vector<const CollectiveMultiTemplateBufferNode *> Collectives;
};

/// Builds the schedule from the kernel ids and fused epilogues in the IR;
/// fails if the kernel ids a user wrote make kernels depend on each other
/// in a cycle.
llvm::Expected<Schedule> buildSchedule(const Graph &G);

/// Walks the schedule as the GPU would run it and fails, naming the kernel
/// and value at fault, unless every kernel reads only graph inputs, values
/// computed inside it and values an earlier kernel wrote, no value is
/// written twice, and every returned value is written. A fused template
/// kernel writes only its epilogue's outputs (getFusedOutputs), never the
/// template's own result.
llvm::Error verifySchedule(const Graph &G);

/// `test-print-schedule`: prints the kernel order and the collective list.
std::unique_ptr<Pass> createTestPrintSchedulePass();
/// `verify-schedule`: runs verifySchedule; the autotuner also runs it on
/// every graph it decided.
std::unique_ptr<Pass> createVerifySchedulePass();

} // namespace mtsched

#endif // MTSCHED_SCHEDULE_SCHEDULE_H
