//===- Scatter.h - The geometry of scatter ----------------------*- C++ -*-===//
//
// `scatter(%dst, %index, %src) {dim}` copies %dst and writes each element of
// %src at the position along 'dim' that %index names in the same place:
//   out[o, index[o, k, i], i] = src[o, k, i]
// (+= with attribute reduce = "add") with the tensors seen as [Outer,
// length along dim, Inner]. The index and
// source have one shape, the destination's but along 'dim'. Equal indices
// in one fibre are written in order, so the last one wins (the
// interpreter and the kernel agree); an index outside [0, DstLen) is an
// error in the interpreter and NaN (0 for integers) over the whole fibre in
// the kernel, which --run reports.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_IR_SCATTER_H
#define MTSCHED_IR_SCATTER_H

#include <cstdint>
#include <optional>

namespace mtsched {

class Node;

struct ScatterShape {
  /// Elements before and after 'dim' (the same for all three operands).
  int64_t Outer = 1, Inner = 1;
  /// Lengths along 'dim': the destination's and the index's (the source's).
  int64_t DstLen = 0, IdxLen = 0;
  /// reduce = "add": the source is added to what is there (scatter_add,
  /// index_add) instead of replacing it.
  bool Add = false;

  int64_t fibres() const { return Outer * Inner; }
};

/// The geometry of a verified scatter node; nullopt if N is not one.
std::optional<ScatterShape> scatterShapeOf(const Node &N);

} // namespace mtsched

#endif // MTSCHED_IR_SCATTER_H
