//===- AutotuneObserver.h - Watching the autotuner --------------*- C++ -*-===//
//
// Observers see the autotuner's progress without taking part in it: the
// terminal's progress line is one; tests and tools may add their own.
// They never change a decision.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_AUTOTUNE_AUTOTUNEOBSERVER_H
#define MTSCHED_AUTOTUNE_AUTOTUNEOBSERVER_H

#include <cstddef>
#include <memory>

namespace mtsched {

class AutotuneObserver {
public:
  virtual ~AutotuneObserver();
  /// Done of a graph's Total undecided nodes have been handled.
  virtual void nodeHandled(size_t Done, size_t Total) {}
};

/// `[mtsched] autotuning D/T nodes` on stderr, redrawn in place, from rank
/// 0 only, when stderr is a terminal and the run has taken over a second.
std::unique_ptr<AutotuneObserver> createProgressLine(int Rank);

} // namespace mtsched

#endif // MTSCHED_AUTOTUNE_AUTOTUNEOBSERVER_H
