//===- MoeCombine.h - The `fuse-moe-combine` pass ---------------*- C++ -*-===//
//
// An MoE combine, the routed rows' results weighted by the router and
// summed over each token's picks (gpt-fast's einsum('tai,ta->ti')), with
// the weighting moved into the grouped_mm that computes the rows
// (docs/PASSES.md, "fuse-moe-combine").
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_LOWERING_MOECOMBINE_H
#define MTSCHED_LOWERING_MOECOMBINE_H

#include "mtsched/Passes/Pass.h"
#include <memory>

namespace mtsched {

std::unique_ptr<Pass> createFuseMoeCombinePass();

} // namespace mtsched

#endif // MTSCHED_LOWERING_MOECOMBINE_H
