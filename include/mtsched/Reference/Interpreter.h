//===- Interpreter.h - fp64 reference semantics of the IR ops ---*- C++ -*-===//
//
// The CPU reference every GPU result is checked against: each op evaluated
// in double precision, with numpy-style broadcasting over the result shape.
// Integer values (i32, i64) are exact: held as int64_t, never as doubles,
// and their arithmetic wraps (two's complement) at the value's width as
// PyTorch's does.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_REFERENCE_INTERPRETER_H
#define MTSCHED_REFERENCE_INTERPRETER_H

#include "mtsched/IR/Attention.h"
#include "mtsched/IR/Graph.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/Error.h"
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mtsched {

/// One value's elements as the interpreter holds them: fp64 for the
/// floating-point types, int64_t for the integer ones (an i32 value is
/// kept wrapped to 32 bits). A double holds integers exactly only up to
/// 2^53, and converting one beyond an integer type's range is undefined:
/// integers never pass through doubles on the interpreter's paths.
class HostValues {
public:
  HostValues() = default;
  explicit HostValues(std::vector<double> F) : F(std::move(F)) {}
  explicit HostValues(std::vector<int64_t> I) : IsInt(true), I(std::move(I)) {}
  /// N zeros, held as the element type T asks.
  static HostValues zeros(DType T, size_t N);

  bool isInt() const { return IsInt; }
  size_t size() const { return IsInt ? I.size() : F.size(); }
  /// Element K as a double (exact for floats; integers round beyond 2^53).
  double getDouble(size_t K) const { return IsInt ? double(I[K]) : F[K]; }
  /// The elements of a float / an integer value.
  std::vector<double> &floats() { return F; }
  const std::vector<double> &floats() const { return F; }
  std::vector<int64_t> &ints() { return I; }
  const std::vector<int64_t> &ints() const { return I; }
  /// Every element as a double (a copy).
  std::vector<double> toDoubles() const;

private:
  bool IsInt = false;
  std::vector<double> F;
  std::vector<int64_t> I;
};

/// V wrapped (two's complement) to what integer type T holds: the low 32
/// bits, sign-extended, for i32; V itself for i64.
int64_t wrapInt(int64_t V, DType T);
/// D converted to integer type T as a cast does: truncated toward zero,
/// then wrapped to T's width (modulo 2^64 first, so every finite double
/// has a defined result); NaN gives 0.
int64_t doubleToInt(double D, DType T);

using ValueData = llvm::DenseMap<const Value *, HostValues>;

/// Why a graph is not interpreted, and where: a node, or the graph itself
/// (its inputs alone are too large).
struct InterpretRefusal {
  llvm::SMLoc Loc;
  std::string Message;
};

/// The bytes the interpreter needs for G: 8 per element of every value
/// (fp64 or int64_t; it keeps every value to the end), plus the largest
/// value once more for the temporaries of one step (an input's file or its
/// drawn values, a sort's order, an operand converted to fp64). Saturates
/// at UINT64_MAX. Upto, if given, stops after that node.
uint64_t interpretBytes(const Graph &G, const Node *Upto = nullptr);

/// The default of --interpret-max-bytes: a quarter of the physical memory
/// (4 GiB where it cannot be found), so that a reference run leaves the
/// machine usable.
uint64_t defaultInterpretMaxBytes();

/// Whether G can be interpreted, decided from its types before anything is
/// allocated: refused are graphs of several ranks with collectives (the
/// interpreter is one rank), custom ops (no semantics) and graphs needing
/// more than MaxBytes (interpretBytes; the refusal points at the node that
/// crosses it). Nullopt if G can be interpreted.
std::optional<InterpretRefusal> checkInterpretable(const Graph &G,
                                                   uint64_t MaxBytes);

/// Evaluates node N from its operands' entries of Data into Data[result].
/// Collectives are the identity (one rank); custom ops are an error.
llvm::Error interpretNode(const Node &N, ValueData &Data);
/// Evaluates every node of G in program order; Data holds the inputs.
/// Graphs of several ranks are refused (checkInterpretable).
llvm::Error interpretGraph(const Graph &G, ValueData &Data);

/// Row R (a flat index over [B, Hq, Sq]) of attention S in fp64: the D
/// values softmax(q_R kᵀ · scale + mask) v, with q, k, v and the additive
/// mask M (null without one, else the whole mask operand) row-major.
void attentionReferenceRow(const AttentionShape &S, const double *Q,
                           const double *K, const double *V, int64_t R,
                           double *Out, const double *M = nullptr);
/// The same row from only what it reads: Qr, the query row, Kh and Vh, the
/// first S.lastKey(R % S.Sq) + 1 rows of its kv head (S.kvHeadOf(R)), and
/// MaskRow, its row of the additive mask (S.maskRowOf(R); null without
/// one). A benchmark's reference draws just these.
void attentionReferenceHeadRow(const AttentionShape &S, const double *Qr,
                               const double *Kh, const double *Vh, int64_t R,
                               double *Out, const double *MaskRow = nullptr);

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
/// are read from Data with the codegen's broadcasting rules. A reshape or
/// transpose in the chain (a matmul's epilogue through layout ops) moves no
/// value of Row: later operands are read at the mapped index, broadcast
/// over the layout op's shape.
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

#endif // MTSCHED_REFERENCE_INTERPRETER_H
