//===- Scan.h - A tensor split around one dimension -------------*- C++ -*-===//
//
// An op along one dimension ('dim') sees its tensor as [Outer, Len, Inner]:
// Outer * Inner fibres of Len elements. cumsum (lib/OpUnits/Cumsum.cpp)
// runs along each fibre in order; scatter (Scatter.cpp there) writes into
// the destination's.
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
/// of range.
std::optional<ScanShape> splitAtDim(const TensorType &T, const Node &N);

} // namespace mtsched

#endif // MTSCHED_IR_SCAN_H
