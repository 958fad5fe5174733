//===- GroupedMm.h - The `fuse-grouped-mm` pass -----------------*- C++ -*-===//
//
// MoE experts applied through gathered weights, matmul(x, w[ids]), become
// one grouped_mm(x, w, ids) (docs/PASSES.md, "fuse-grouped-mm").
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_LOWERING_GROUPEDMM_H
#define MTSCHED_LOWERING_GROUPEDMM_H

#include "mtsched/Passes/Pass.h"
#include <memory>

namespace mtsched {

std::unique_ptr<Pass> createFuseGroupedMmPass();

} // namespace mtsched

#endif // MTSCHED_LOWERING_GROUPEDMM_H
