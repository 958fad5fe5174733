//===- PeerAccess.h - Which GPUs reach each other's memory ------*- C++ -*-===//
//
// Topology discovery's NVLink half (Topology.h, discoverTopology): the
// peer-memory collectives load and store a peer GPU's memory, which works
// exactly where cuDeviceCanAccessPeer says so. The CUDA driver is opened on
// demand, as everywhere in the cuda backend.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_BACKEND_CUDA_PEERACCESS_H
#define MTSCHED_BACKEND_CUDA_PEERACCESS_H

#include "llvm/Support/Error.h"
#include <vector>

namespace mtsched {
namespace cuda {

/// The devices whose memory device Ordinal can access directly, Ordinal
/// itself included, in order; the error says why CUDA cannot tell (no
/// driver, no device, no such device).
llvm::Expected<std::vector<int>> peerOrdinals(int Ordinal);

/// The number of devices, or the reason there are none.
llvm::Expected<int> countDevices();

} // namespace cuda
} // namespace mtsched

#endif // MTSCHED_BACKEND_CUDA_PEERACCESS_H
