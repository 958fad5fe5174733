//===- Layout.h - Ops that move elements without arithmetic --*- C++ -*-===//
//
// The layout ops of the op table (OpCategory::Layout), on dense row-major
// tensors:
//   %y = reshape(%x) : T          the same elements in T's shape (a view)
//   %y = expand(%x) : T           %x broadcast to T's shape (right-aligned)
//   %y = transpose(%x) {perm = [p0, p1, ...]}   y[i0, i1, ...] = x[..] with
//                                 dimension d of y being dimension p_d of x
//   %y = slice(%x) {dim = d, start = s, end = e, step = k}
//                                 elements s, s+k, ... < e along d
//   %y = concat(%a, %b, ...) {dim = d}          the operands joined along d
//   %y = index_select(%x, %i) {dim = d}         y[.., j, ..] = x[.., i[j], ..]
//                                 along d; %i a rank-1 i32/i64 tensor
//   %y = gather(%x, %i) {dim = d}               y[.., j, ..] = x[.., i[.., j,
//   ..], ..]
//                                 along d; %i i32/i64 of y's shape
// Each output element reads one operand element. LayoutPlan says which, in
// one form the fp64 interpreter and the CUDA gather kernels share: the
// output's flat index is split into its multi-index o, and operand k (the
// one whose range along the concat dimension holds o[ConcatDim]) is read at
// Base + sum_d o[d] * Coef[d].
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_IR_LAYOUT_H
#define MTSCHED_IR_LAYOUT_H

#include <cstdint>
#include <optional>
#include <vector>

namespace mtsched {

class Node;

struct LayoutPlan {
  struct Source {
    /// The operand read, and the half-open range of the output's
    /// ConcatDim it covers (the whole dimension but for concat).
    unsigned Operand = 0;
    int64_t Lo = 0, Hi = 0;
    /// The operand's flat index: Base + sum over d of o[d] * Coef[d].
    int64_t Base = 0;
    std::vector<int64_t> Coef;
  };
  /// reshape: output element i is operand element i (no kernel runs).
  bool Identity = false;
  std::vector<int64_t> OutShape;
  unsigned ConcatDim = 0;
  std::vector<Source> Sources;
  /// index_select: the operand holding the indices, -1 for the other ops.
  /// Output element o also reads Indices[o[IndexDim]], which must lie in
  /// [0, IndexBound), and adds it times IndexCoef to the source index (the
  /// Source's Coef is 0 along IndexDim).
  int IndexOperand = -1;
  unsigned IndexDim = 0;
  /// gather: the indices have the output's shape, and output element o
  /// reads Indices[o] instead.
  bool IndexPerElement = false;
  int64_t IndexCoef = 0, IndexBound = 0;

  /// The operand and its flat index that output element I reads (for
  /// index_select, before the index's part).
  std::pair<unsigned, int64_t> sourceOf(int64_t I) const;
  /// index_select: the position in the index tensor output element I uses.
  int64_t indexPositionOf(int64_t I) const;
};

/// The plan of layout node N, which the verifier accepted; nullopt if N is
/// not a well-formed layout op.
std::optional<LayoutPlan> layoutPlanOf(const Node &N);

/// Where a layout op that is a bijection of the elements (reshape of a
/// dense value, transpose) puts each element of its operand: operand
/// element I is result element sum_d ((I / Div[d]) % Mod[d]) * Stride[d],
/// or I itself when Identity (reshape). A GEMM's epilogue continues
/// through such an op by index substitution: it keeps computing at the
/// GEMM's element and reads and writes later values at the mapped index.
struct ElementMap {
  bool Identity = false;
  std::vector<int64_t> Div, Mod, Stride;
  int64_t apply(int64_t I) const;
};

/// N's element map; nullopt unless N is a reshape or a transpose whose
/// perm is a permutation (slice, expand, concat, index_select and gather
/// drop or repeat elements).
std::optional<ElementMap> elementMapOf(const Node &N);

} // namespace mtsched

#endif // MTSCHED_IR_LAYOUT_H
