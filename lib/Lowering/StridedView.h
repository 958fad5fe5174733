//===- StridedView.h - Layout chains seen as strided views ------*- C++ -*-===//
//
// The MoE rewrites (fuse-grouped-mm, fuse-moe-combine) follow the reshape
// and transpose chains between a value and a matmul operand as strided
// views of the value (PyTorch's view rule), and name which base dimensions
// each dimension of the view covers. Private to lib/Lowering.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_LIB_LOWERING_STRIDEDVIEW_H
#define MTSCHED_LIB_LOWERING_STRIDEDVIEW_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include <cstdint>
#include <optional>

namespace mtsched {
class Node;
class Value;

namespace views {

/// One dimension of a strided view of a contiguous base tensor.
struct Dim {
  int64_t Size, Stride;
};
using View = llvm::SmallVector<Dim, 6>;

/// Labels of the base dimensions a view dimension covers, outermost first.
using Cover = llvm::SmallVector<int, 4>;

/// The layout nodes between a base value and a matmul operand, base first.
struct Chain {
  Value *Base = nullptr;
  llvm::SmallVector<Node *, 8> Nodes;
};

/// The contiguous view of a tensor of shape Shape.
View contiguous(llvm::ArrayRef<int64_t> Shape);
/// V reshaped to Shape without a copy (PyTorch's computeStride), or
/// nullopt where the reshape would have to copy.
std::optional<View> reshapeView(const View &V, llvm::ArrayRef<int64_t> Shape);
/// The layout ops (reshape, transpose) from the nearest other value to V.
Chain layoutChain(Value *V);
/// V seen through the layout nodes Nodes, in order.
std::optional<View> applyChain(View V, llvm::ArrayRef<Node *> Nodes);
/// The base dimensions (of size > 1) that view dimension D covers, as
/// labels Labels[b], or nullopt if it covers part of one.
std::optional<Cover> coverOf(Dim D, llvm::ArrayRef<int64_t> Base,
                             llvm::ArrayRef<int> Labels);
/// The labels of the base dimensions the dimensions of V cover, in order,
/// or nullopt.
std::optional<llvm::SmallVector<Cover, 6>>
covers(const View &V, llvm::ArrayRef<int64_t> Base, llvm::ArrayRef<int> Labels);

} // namespace views
} // namespace mtsched

#endif // MTSCHED_LIB_LOWERING_STRIDEDVIEW_H
