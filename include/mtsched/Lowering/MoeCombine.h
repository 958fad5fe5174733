//===- MoeCombine.h - The `fuse-moe-combine` pass ---------------*- C++ -*-===//
//
// An MoE combine, the routed rows' results weighted by the router and
// summed over each token's picks (gpt-fast's einsum('tai,ta->ti')), with
// the weighting moved into the grouped_mm that computes the rows
// and, optionally, the sum over the picks too (docs/PASSES.md,
// "fuse-moe-combine").
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_LOWERING_MOECOMBINE_H
#define MTSCHED_LOWERING_MOECOMBINE_H

#include "mtsched/Passes/Pass.h"
#include <memory>

namespace mtsched {

std::unique_ptr<Pass> createFuseMoeCombinePass();
/// `fuse-moe-combine-sum`: the picks' sum after it folded into the
/// grouped_mm's kernel (`combine = true`).
std::unique_ptr<Pass> createFuseMoeCombineSumPass();

} // namespace mtsched

#endif // MTSCHED_LOWERING_MOECOMBINE_H
