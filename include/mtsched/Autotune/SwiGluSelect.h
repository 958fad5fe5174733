//===- SwiGluSelect.h - Merged or split SwiGLU, by measurement --*- C++ -*-===//
//
// `select-swiglu` runs after `autotune`. For each merged gate+up GEMM that
// `fuse-swiglu` added as an alternative of %gu, it compares the decided
// merged node's time with the decided split form's: both GEMMs as decided
// (fused with their epilogue, or plus the epilogue kernel they leave), and
// any node of the pattern in no epilogue as its own kernel; the merged side
// is charged for consumers of %gu the split form fused (they run as a kernel
// of their own after it). The faster stays: merged, the alternative takes %gu's
// place and the two GEMMs and the silu go; split, the alternative goes. Times
// within --tie-tolerance keep the merged form; --swiglu-form=merged or
// split keeps that form instead, to time a whole graph in it. Where either
// form takes at least --swiglu-sustained-us, the two forms are timed again
// against each other, interleaved at sustained load
// (Autotuner::measureFormsUs), and those times decide: bursts favour short
// kernels. Either way %gu records both times (`swiglu_merged_us`,
// `swiglu_split_us`; re-timed, also `swiglu_timing` and the burst times),
// and the result is an ordinary decided graph (see docs/PASSES.md).
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_AUTOTUNE_SWIGLUSELECT_H
#define MTSCHED_AUTOTUNE_SWIGLUSELECT_H

#include "mtsched/Passes/Pass.h"
#include "mtsched/Schedule/Fusion.h"
#include <memory>

namespace mtsched {

class Autotuner;

/// `select-swiglu`: keeps the faster of each merged/split SwiGLU pair;
/// unfused epilogues of the split GEMMs are measured through Session.
std::unique_ptr<Pass> createSelectSwiGluPass(Autotuner *Session);

/// Whether the merged form stays: it is listed first, so it also stays
/// when the split form is faster by no more than TieTolerance (a fraction,
/// --tie-tolerance), as every "fastest" is picked (firstWithinTolerance).
/// On two H100s the forms of Llama-3-8B's decode MLP measured within 0.3%
/// and the strictly faster one changed from run to run. Form (--swiglu-form)
/// can fix the answer instead: Merged keeps any merged form that ran (a
/// finite time), Split never keeps it.
bool keepMergedSwiGlu(double MergedUs, double SplitUs, double TieTolerance,
                      SwiGluForm Form = SwiGluForm::Measured);

} // namespace mtsched

#endif // MTSCHED_AUTOTUNE_SWIGLUSELECT_H
