//===- Interpreter.h - fp64 reference semantics of the IR ops ---*- C++ -*-===//
//
// The CPU reference every GPU result is checked against: each op evaluated
// in double precision, with numpy-style broadcasting over the result shape.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_AUTOTUNE_INTERPRETER_H
#define MTSCHED_AUTOTUNE_INTERPRETER_H

#include "mtsched/IR/Attention.h"
#include "mtsched/IR/Graph.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/Error.h"
#include <cstdint>
#include <vector>

namespace mtsched {

using ValueData = llvm::DenseMap<const Value *, std::vector<double>>;

/// Evaluates node N from its operands' entries of Data into Data[result].
/// Collectives are the identity (one rank); custom ops are an error.
llvm::Error interpretNode(const Node &N, ValueData &Data);
/// Evaluates every node of G in program order; Data holds the inputs.
llvm::Error interpretGraph(const Graph &G, ValueData &Data);

/// Row R (a flat index over [B, Hq, Sq]) of attention S in fp64: the D
/// values softmax(q_R kᵀ · scale + mask) v, with q, k, v row-major.
void attentionReferenceRow(const AttentionShape &S, const double *Q,
                           const double *K, const double *V, int64_t R,
                           double *Out);
/// The same row from only what it reads: Qr, the query row, and Kh and Vh,
/// the first S.lastKey(R % S.Sq) + 1 rows of its kv head
/// (S.kvHeadOf(R)). A benchmark's reference draws just these.
void attentionReferenceHeadRow(const AttentionShape &S, const double *Qr,
                               const double *Kh, const double *Vh, int64_t R,
                               double *Out);

/// The values interpretRowChain reads besides its row, element by flat
/// index: stored (the interpreter's) or drawn on demand (a benchmark's
/// reference, which reads a few rows of tensors too large to draw whole).
class RowOperands {
public:
  virtual ~RowOperands();
  /// How many elements V holds; -1 where V has no value.
  virtual int64_t size(const Value *V) const = 0;
  /// Element I of V, for I in [0, size(V)).
  virtual double at(const Value *V, int64_t I) const = 0;
};

/// RowOperands over stored values.
class StoredRowOperands : public RowOperands {
public:
  explicit StoredRowOperands(const ValueData &Data) : Data(Data) {}
  int64_t size(const Value *V) const override;
  double at(const Value *V, int64_t I) const override;

private:
  const ValueData &Data;
};

/// Applies the pointwise/row-reduction chain to one row `Row` (index R in
/// an iteration space of Rows rows of length Row.size()); external operands
/// are read from Data with the codegen's broadcasting rules.
llvm::Error interpretRowChain(llvm::ArrayRef<const Node *> Chain,
                              const Value *Start, int64_t R, int64_t Rows,
                              std::vector<double> &Row,
                              const RowOperands &Data);
llvm::Error interpretRowChain(llvm::ArrayRef<const Node *> Chain,
                              const Value *Start, int64_t R, int64_t Rows,
                              std::vector<double> &Row, const ValueData &Data);

/// Host conversions (round to nearest even).
uint16_t floatToBF16(float F);
float bf16ToFloat(uint16_t H);
uint16_t floatToF16(float F);
float f16ToFloat(uint16_t H);
/// fp8 (T is f8e4m3 or f8e5m2): round to nearest even; values beyond the
/// largest finite one, infinities included, saturate to it (the hardware's
/// .satfinite conversion, and what fp8 quantisation wants); NaN stays NaN.
uint8_t floatToF8(float F, DType T);
float f8ToFloat(uint8_t B, DType T);
/// D rounded to what dtype T can hold.
double roundTo(double D, DType T);

} // namespace mtsched

#endif // MTSCHED_AUTOTUNE_INTERPRETER_H
