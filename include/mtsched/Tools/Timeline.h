//===- Timeline.h - The decided schedule as a trace -------------*- C++ -*-===//
//
// `mtsched-opt --emit=timeline` writes the decided graph as Chrome / Perfetto
// trace-event JSON: what the GPUs would run, not what the tool did (that is
// --trace). Each rank is a process with two tracks (threads): `compute`,
// where kernels run back to back, and `comm`, where collectives run. Each
// kernel (a fused group is one event listing its members) and collective
// sits at its time: the decision's timing from the IR (measured, or
// modelled plus noise on the simulator), else the cost model's time on the
// device (plain buffer kernels, which are never benchmarked).
//
// Placement is a list schedule over the graph's kernel order
// (buildSchedule): a kernel starts when its stream is free and every
// kernel it reads from has finished. A collective thus overlaps compute
// that does not depend on it, and is inline (the compute stream waits)
// where the next kernel reads its result.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_TOOLS_TIMELINE_H
#define MTSCHED_TOOLS_TIMELINE_H

#include "mtsched/Runtime/DeviceDesc.h"
#include "llvm/Support/Error.h"

namespace llvm {
class raw_ostream;
}

namespace mtsched {

class Module;

/// Writes every graph of M as one trace (JSON object with `traceEvents`).
/// Fails, writing nothing, when a graph is not lowered and decided (a
/// high-level op or an undecided multi-template buffer) or has no valid
/// schedule.
llvm::Error writeTimeline(const Module &M, const DeviceDesc &D,
                          llvm::raw_ostream &OS);

} // namespace mtsched

#endif // MTSCHED_TOOLS_TIMELINE_H
