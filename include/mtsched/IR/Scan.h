//===- Scan.h - The geometry of cumsum --------------------------*- C++ -*-===//
//
// `cumsum(%x) {dim}` keeps %x's shape: element i along 'dim' is the sum of
// elements 0..i of its fibre. Seen as [Outer, Len, Inner], each of the
// Outer * Inner fibres is summed in order: floating-point sums accumulate
// in fp64 in the interpreter and in fp32 in the kernel (as PyTorch does
// for bf16 and f16), integers exactly.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_IR_SCAN_H
#define MTSCHED_IR_SCAN_H

#include <cstdint>
#include <optional>

namespace mtsched {

class Node;

struct TensorType;

struct ScanShape {
  /// Elements before and after 'dim', and the length along it.
  int64_t Outer = 1, Len = 0, Inner = 1;
  /// 'dim', counted from the front.
  int64_t Dim = 0;

  int64_t fibres() const { return Outer * Inner; }
};

/// T seen as [Outer, Len, Inner] around N's attribute 'dim' (default -1,
/// negative counts from the end); nullopt if T has rank 0 or 'dim' is out
/// of range. cumsum's and scatter's geometry.
std::optional<ScanShape> splitAtDim(const TensorType &T, const Node &N);

/// The geometry of a verified cumsum node; nullopt if N is not one.
std::optional<ScanShape> scanShapeOf(const Node &N);

} // namespace mtsched

#endif // MTSCHED_IR_SCAN_H
