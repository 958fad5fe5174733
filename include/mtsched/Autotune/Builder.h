//===- Builder.h - Builds a batch of choices ahead of timing ----*- C++ -*-===//
//
// The first half of a backend, after TVM MetaSchedule's Builder: the
// autotuner hands it, once, the batch of nodes it is about to time (each at
// its workload, with the choices pruning kept), before timing any. A builder
// compiles asynchronously where it can (the cuda backend: NVRTC on its
// thread pool, through the kernel cache) and returns at once, for every
// choice, a built artifact or why it could not be built: results as data,
// which the autotuner hands to the Runner (Runner.h) that times them. A
// backend with nothing to compile (the simulator) has a trivial builder.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_AUTOTUNE_BUILDER_H
#define MTSCHED_AUTOTUNE_BUILDER_H

#include "mtsched/Autotune/Workload.h"
#include "llvm/ADT/ArrayRef.h"
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mtsched {

/// One node of a batch to build: N at workload W, and which of its choices
/// will be timed (Kept[I] for choice I; the others were pruned and are not
/// built).
struct BuildInput {
  const MultiTemplateBufferNode *N = nullptr;
  Workload W;
  std::vector<bool> Kept;
};

/// What a builder made of one choice; only the runner of the same backend
/// reads it. Building may go on on other threads after build() returned.
class Artifact {
public:
  virtual ~Artifact();
  /// Blocks until the artifact is built; why it failed, or empty.
  virtual std::string wait() const = 0;
};

/// What building one choice gave: an artifact, or why there is none. Both
/// empty: there was nothing to build (a pruned choice, a backend that
/// builds nothing, a choice the runner prepares itself).
struct BuildResult {
  std::shared_ptr<const Artifact> Built;
  /// Why the choice cannot be built (no kernel for it, a fault injected at
  /// build): the choice is not run, and fails with this message.
  std::string Error;
  bool failed() const { return !Error.empty(); }
};

/// A node's results, one per choice, in the node's order.
using BuiltChoices = std::vector<BuildResult>;

class Builder {
public:
  virtual ~Builder();
  /// Builds the kept choices of every input, asynchronously where the
  /// backend can, and returns at once: one BuiltChoices per input, in
  /// order. The walk's batch is built on every rank at the same point and
  /// holds the same collectives (its other nodes differ under
  /// --split-tuning=nodes), so a backend may start there what every rank
  /// must start together (the cuda backend: NCCL's communicator, for a
  /// collective over every rank).
  virtual std::vector<BuiltChoices> build(llvm::ArrayRef<BuildInput> Batch) = 0;
  /// What the builder counted of its own work, by name, for the report
  /// (cuda: kernels compiled, read from the cache, failed, compile time).
  virtual std::vector<std::pair<std::string, int64_t>> getCounters() const {
    return {};
  }
};

/// The builder of a backend that compiles nothing: every choice is ready
/// as it is (empty results).
std::unique_ptr<Builder> createTrivialBuilder();

} // namespace mtsched

#endif // MTSCHED_AUTOTUNE_BUILDER_H
