//===- CollectiveKernels.h - Peer-memory collective CUDA text ---*- C++ -*-===//
//
// Internal to lib/Backend/Cuda: the CUDA text of the peer-memory collective
// kernels (CollectiveKernels.cpp), which generateCollectiveKernel
// (CollectiveCodegen.cpp) specialises with #defines. A kernel's source is
// the defines, Prelude, then one body.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_LIB_BACKEND_CUDA_COLLECTIVEKERNELS_H
#define MTSCHED_LIB_BACKEND_CUDA_COLLECTIVEKERNELS_H

namespace mtsched {
namespace collective {

/// Loads, stores, the barriers between ranks and the epilogue helpers.
extern const char *const Prelude;
/// all_reduce one_shot / two_shot (and `hier`'s epilogue), element-wise.
extern const char *const FlatAllReduce;
/// all_reduce with a fused rmsnorm: one block per row.
extern const char *const RowAllReduce;
/// all_gather, reduce_scatter and all_to_all over peer memory.
extern const char *const P2P;

} // namespace collective
} // namespace mtsched

#endif // MTSCHED_LIB_BACKEND_CUDA_COLLECTIVEKERNELS_H
