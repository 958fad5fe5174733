//===- DrawnValues.h - Seeded inputs as a reference reads them --*- C++ -*-===//
//
// A benchmark's fp64 reference checks a few sampled output rows, and a row
// reads a row of an epilogue's residual, one query's kv head, a GEMM's
// activation row. Drawing whole tensors on the host for that (a decode
// attention's K/V caches are 67M elements) cost a Llama layer's tuning a
// second per rank. Elements are hashes of their index (RandomInputs.h), so
// a value here is drawn element by element, on demand, and stored whole
// only where a reference reads all of it (a GEMM's weights on the host).
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_REFERENCE_DRAWNVALUES_H
#define MTSCHED_REFERENCE_DRAWNVALUES_H

#include "mtsched/IR/Types.h"
#include "mtsched/Reference/Interpreter.h"
#include "llvm/ADT/DenseMap.h"
#include <cstdint>
#include <vector>

namespace mtsched {

class DrawnValues : public RowOperands {
public:
  /// V holds Count elements, those of randomValues(Count, Seed, Stream, T).
  /// With Bound > 0 (an op's index operand, OpUnitInfo::IndexBound) the
  /// elements are indices in [0, Bound) instead: the same stream drawn as
  /// f32 and mapped from [-1, 1) onto 0..Bound-1, as makeGraphInputs draws
  /// a graph input that indexes.
  void add(const Value *V, int64_t Count, uint64_t Seed, uint64_t Stream,
           DType T, int64_t Bound = 0);
  /// Draws V's elements once (in parallel) and keeps them; a reference
  /// that reads V whole reads them through data().
  const std::vector<double> &store(const Value *V);
  /// V's stored elements (store() first).
  const double *data(const Value *V) const;
  /// Elements [Begin, Begin + Len) of V.
  std::vector<double> slice(const Value *V, int64_t Begin, int64_t Len) const;

  int64_t size(const Value *V) const override;
  double at(const Value *V, int64_t I) const override;

private:
  struct Entry {
    uint64_t Seed = 0, Stream = 0, Key = 0;
    int64_t Count = 0, Bound = 0;
    DType T = DType::F32;
    bool Stored = false;
    std::vector<double> Elems;
  };
  const Entry &entry(const Value *V) const;
  llvm::DenseMap<const Value *, Entry> Entries;
};

} // namespace mtsched

#endif // MTSCHED_REFERENCE_DRAWNVALUES_H
