//===- DeviceDesc.h - What the simulator knows about a GPU ------*- C++ -*-===//
//
// A device description is the handful of numbers the roofline cost model
// needs: memory and link bandwidth, compute rate, and the fixed costs of a
// launch, a link access and a cross-GPU barrier. Built-in descriptions exist
// for the H100 and H200; users describe other machines in a JSON file (see
// docs/SIMULATOR.md).
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_RUNTIME_DEVICEDESC_H
#define MTSCHED_RUNTIME_DEVICEDESC_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <cstdint>
#include <string>
#include <vector>

namespace llvm {
class raw_ostream;
}

namespace mtsched {

/// One GPU and its links to its peers. A default-constructed description is
/// the built-in "h200", so option structs that hold one are usable as they
/// are.
struct DeviceDesc {
  std::string Name = "h200";
  /// Peak HBM bandwidth, GB/s (1e9 bytes per second).
  double HbmGBps = 4800;
  /// Dense tensor-core peak for bf16/fp16, TFLOP/s.
  double PeakBf16Tflops = 989;
  /// Peak of the fp32 CUDA cores (no tensor cores), TFLOP/s; also the rate
  /// of pointwise arithmetic.
  double PeakFp32Tflops = 67;
  /// NVLink bandwidth per direction, per GPU, GB/s.
  double LinkGBps = 450;
  /// Latency of one access to a peer's memory over the link, us.
  double LinkLatencyUs = 0.5;
  /// Device-side cost of one kernel launched from a CUDA graph, us.
  double LaunchUs = 2.5;
  /// A grid-wide barrier across GPUs through peer-memory flags, us.
  double BarrierUs = 3.5;
  int NumSMs = 132;
  double L2MB = 50;
  /// The network link between hosts, per GPU: a 400 Gb/s NIC (50 GB/s per
  /// direction) and the latency of one message through it and a switch.
  /// Only hierarchical collectives of groups spanning hosts use them.
  double NetGBps = 50;
  double NetLatencyUs = 3;
};

/// One numeric field of a device description: its JSON key and where it
/// lives. The order is the order of device files, of the hash and of the
/// docs.
struct DeviceField {
  llvm::StringLiteral Key;
  double DeviceDesc::*Member;
};
llvm::ArrayRef<DeviceField> deviceNumericFields();
/// The network fields (net_gbps, net_latency_us): optional in a device
/// file, the defaults where absent.
llvm::ArrayRef<DeviceField> deviceNetworkFields();

/// The built-in descriptions' names, in a fixed order.
std::vector<llvm::StringRef> builtinDeviceNames();
/// "h100" (SXM) or "h200"; an error lists the known names otherwise.
llvm::Expected<DeviceDesc> getBuiltinDevice(llvm::StringRef Name);
/// Reads a JSON device file. Every key but the network fields must be
/// present; every number must be positive (name: a non-empty string); errors
/// name the file and the key.
llvm::Expected<DeviceDesc> loadDeviceFile(llvm::StringRef Path);
/// Parses the contents of a device file; Path is only used in messages.
llvm::Expected<DeviceDesc> parseDeviceJSON(llvm::StringRef Text,
                                           llvm::StringRef Path);
/// Writes D as a device file that loadDeviceFile reads back unchanged.
void writeDeviceFile(const DeviceDesc &D, llvm::raw_ostream &OS);
/// A stable hash of every field (xxHash64 of a canonical serialisation), for
/// cache keys: equal descriptions hash equal on every platform.
uint64_t hashDevice(const DeviceDesc &D);

} // namespace mtsched

#endif // MTSCHED_RUNTIME_DEVICEDESC_H
