//===- NcclApi.h - NCCL opened at run time ----------------------*- C++ -*-===//
//
// Like CudaApi.h: mtsched never includes nccl.h nor links NCCL. The few
// types and entry points the cuda backend needs for collectives across GPUs
// are declared here and looked up in libnccl.so.2 when first needed, so a
// build and a machine without NCCL are fine until a multi-rank collective
// is timed (that choice then fails with the reason).
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_BACKEND_CUDA_NCCLAPI_H
#define MTSCHED_BACKEND_CUDA_NCCLAPI_H

#include "mtsched/Backend/Cuda/CudaApi.h"
#include "llvm/Support/Error.h"
#include <string>

namespace mtsched {
namespace nccl {

using ncclResult_t = int;
using ncclComm_t = struct ncclComm *;
/// NCCL_UNIQUE_ID_BYTES is 128.
struct ncclUniqueId {
  char Internal[128];
};

constexpr ncclResult_t ncclSuccess = 0;
constexpr int ncclSum = 0;
constexpr int ncclUint8 = 1, ncclFloat16 = 6, ncclFloat32 = 7, ncclBfloat16 = 9;

struct NcclApi {
  ncclResult_t (*ncclGetVersion)(int *);
  ncclResult_t (*ncclGetUniqueId)(ncclUniqueId *);
  ncclResult_t (*ncclCommInitRank)(ncclComm_t *, int, ncclUniqueId, int);
  ncclResult_t (*ncclCommDestroy)(ncclComm_t);
  ncclResult_t (*ncclAllReduce)(const void *, void *, size_t, int, int,
                                ncclComm_t, cuda::CUstream);
  ncclResult_t (*ncclAllGather)(const void *, void *, size_t, int, ncclComm_t,
                                cuda::CUstream);
  ncclResult_t (*ncclReduceScatter)(const void *, void *, size_t, int, int,
                                    ncclComm_t, cuda::CUstream);
  /// all_to_all: one send and one receive per peer, grouped.
  ncclResult_t (*ncclSend)(const void *, size_t, int, int, ncclComm_t,
                           cuda::CUstream);
  ncclResult_t (*ncclRecv)(void *, size_t, int, int, ncclComm_t,
                           cuda::CUstream);
  ncclResult_t (*ncclGroupStart)();
  ncclResult_t (*ncclGroupEnd)();
  const char *(*ncclGetErrorString)(ncclResult_t);
  int Version = 0;

  /// "NCCL error N (text)".
  std::string errorString(ncclResult_t R) const;
};

/// Opens libnccl.so.2 (else libnccl.so; MTSCHED_LIBNCCL overrides) once per
/// process; the error says which library or symbol is missing.
llvm::Expected<const NcclApi &> loadNccl();

} // namespace nccl
} // namespace mtsched

#endif // MTSCHED_BACKEND_CUDA_NCCLAPI_H
