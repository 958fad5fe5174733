//===- GroupKernels.cpp - Kernels of fused pointwise / reduction groups ---===//
//
// One kernel per fused group of buffers (and a GEMM's epilogue run apart):
// one thread per element (8 adjacent ones where rows allow, moved as
// 16-byte words), or one block per row when the group holds a row
// reduction or a last-dim sum/max (the softmax written by hand, a mean).
// Groups with layout ops or a sum/max over another dimension go to
// LayoutGroupKernels.cpp.
//
//===----------------------------------------------------------------------===//
#include "GemmCodegen.h"
#include "mtsched/Backend/Cuda/CudaCodegen.h"
#include "mtsched/Schedule/Fusion.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/raw_ostream.h"

using namespace mtsched;
using namespace mtsched::codegen;

static llvm::Error err(const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Msg);
}

static std::string var(const Value *V) {
  return "v_" + sanitizeIdentifier(V->getName());
}

namespace {

class GroupEmitter {
public:
  GroupEmitter(llvm::StringRef Name, llvm::ArrayRef<const Node *> Nodes,
               llvm::ArrayRef<const Value *> Outputs, int64_t RowsOverride)
      : Name(sanitizeIdentifier(Name)), Nodes(Nodes),
        RowsOverride(RowsOverride) {
    P.Outputs.assign(Outputs.begin(), Outputs.end());
  }

  llvm::Expected<KernelSource> emit();

private:
  bool inGroup(const Value *V) const { return Defined.count(V); }
  enum class Ctx { Flat, Vector, Scalar };
  llvm::Expected<std::string> operand(const Value *V, Ctx C);
  llvm::Error emitFlat(llvm::raw_ostream &OS);
  llvm::Error emitRows(llvm::raw_ostream &OS);
  /// Adjacent elements a thread handles: 8 where rows hold a multiple of 8
  /// (whole groups then lie in one row and, each buffer being a separate
  /// allocation, on 16-byte boundaries), else 1.
  int64_t vectorWidth() const { return Inner >= 8 && Inner % 8 == 0 ? 8 : 1; }
  /// Tells the compiler that every buffer starts 16-byte aligned (each is
  /// a cuMemAlloc of its own, or a view of one), so that it merges the
  /// loads and stores of a group.
  std::string alignedPointers() const;
  /// Whether VEC elements of V's storage type fill whole 16-byte words.
  bool packable(const Value *V, int64_t Vec) const {
    return Vec > 1 && dtypeBytes(V->getType().Dtype) * Vec % 16 == 0;
  }
  /// The 16-byte words VEC values of V's storage type fill, and a union of
  /// them with the values (`union { mt_u4 u[W]; T h[VEC]; }`).
  static int64_t wordsOf(const Value *V, int64_t Vec) {
    return dtypeBytes(V->getType().Dtype) * Vec / 16;
  }
  static std::string wordUnion(const Value *V, int64_t Vec) {
    return "union { mt_u4 u[" + std::to_string(wordsOf(V, Vec)) + "]; " +
           storageType(V->getType().Dtype) + " h[VEC]; }";
  }
  /// Stores the VEC values pk_<name>.h[] of output V at element Base as
  /// 16-byte words.
  std::string packedStore(const Value *V, int64_t Vec,
                          const std::string &Base) const;

  std::string Name;
  llvm::ArrayRef<const Node *> Nodes;
  int64_t RowsOverride;
  ParamList P;
  llvm::DenseMap<const Value *, bool> Defined; // value -> is row scalar
  TensorType Iter;
  bool Resized = false;
  int64_t Rows = 0, Inner = 0;
  unsigned BlockX = 256;
  /// The flat kernel's 16-byte-word loads, before its element loop, and
  /// their values in the order of their loads.
  llvm::SetVector<const Value *> Preloaded;
  /// The flat kernel's iterations a thread loads before it computes any
  /// (flatUnroll).
  int64_t Unroll = 1;
  /// A rows kernel's layout members, read through before its reduction.
  std::vector<const Node *> Layout;
  std::string Preloads;
};

} // namespace

/// The iterations of a flat kernel's loop a thread loads before it
/// computes any: 4 for a stream of at least 2^20 groups of VEC = 8 with
/// 16-byte-word operands and an op of 4 or more flops an element (GELU,
/// SiLU, exp, ...), else 1. On an H200 (bench/device/pointwise-sweep.py,
/// docs/BENCHMARKS.md) Megatron's bias + GELU over 4096 x 49152 bf16 ran
/// 264.5 us with 4 against 292.9 with 1 (the erf between a thread's load
/// and its store left one load in flight), while a residual add over 4096 x
/// 12288 ran 71.9 against 71.1: a stream without such an op is at the
/// memory's speed already. A decode step's small kernels want every thread
/// they can get.
static int64_t flatUnroll(int64_t Groups, int64_t Vec, bool HasWordLoads,
                          double MaxFlopsPerElement) {
  return Vec == 8 && HasWordLoads && Groups >= (int64_t(1) << 20) &&
                 MaxFlopsPerElement >= 4
             ? 4
             : 1;
}

std::string GroupEmitter::packedStore(const Value *V, int64_t Vec,
                                      const std::string &Base) const {
  int64_t Words = wordsOf(V, Vec);
  std::string Pk = "pk_" + P.name(V);
  return "    #pragma unroll\n    for (int q = 0; q < " +
         std::to_string(Words) + "; ++q)\n      ((mt_u4 *)(" + P.name(V) +
         "_out + " + Base + "))[q] = " + Pk + ".u[q];\n";
}

std::string GroupEmitter::alignedPointers() const {
  std::string S;
  for (const Value *V : P.Inputs)
    S += "  " + P.name(V) + " = (const " + storageType(V->getType().Dtype) +
         " *)__builtin_assume_aligned(" + P.name(V) + ", 16);\n";
  for (const Value *V : P.Outputs)
    S += "  " + P.name(V) + "_out = (" + storageType(V->getType().Dtype) +
         " *)__builtin_assume_aligned(" + P.name(V) + "_out, 16);\n";
  return S;
}

llvm::Expected<std::string> GroupEmitter::operand(const Value *V, Ctx C) {
  auto It = Defined.find(V);
  if (It != Defined.end()) {
    if (It->second || C != Ctx::Vector)
      return var(V);
    return var(V) + "[j]";
  }
  P.Inputs.insert(V);
  if (C == Ctx::Scalar) {
    int64_t Num = V->getType().numElements();
    if (Num == 1)
      return loadExpr(V->getType().Dtype, P.name(V), "0");
    if (Num == Rows || Num == rowsOf(Iter))
      return loadExpr(V->getType().Dtype, P.name(V), "r");
    return err("'%" + V->getName() + "' of shape " +
               shapeStr(V->getType().Shape) + " cannot be read once per row");
  }
  llvm::Expected<std::string> Idx =
      indexFor(V->getType(), Rows, Inner, Resized ? nullptr : &Iter);
  if (!Idx)
    return Idx.takeError();
  // The flat kernel's VEC elements of a full-shape or a row-vector operand
  // are adjacent: one 16-byte-word load before the element loop.
  if (C == Ctx::Flat && packable(V, vectorWidth())) {
    std::string Base = *Idx == "c" ? "c0"
                       : *Idx == "(r * " + std::to_string(Inner) + "LL + c)"
                           ? "i0"
                           : "";
    if (!Base.empty()) {
      std::string L = "ld_" + P.name(V);
      if (Preloaded.insert(V))
        Preloads += "    " + wordUnion(V, vectorWidth()) + " " + L +
                    ";\n    #pragma unroll\n    for (int q = 0; q < " +
                    std::to_string(wordsOf(V, vectorWidth())) +
                    "; ++q)\n      " + L + ".u[q] = ((const mt_u4 *)(" +
                    P.name(V) + " + " + Base + "))[q];\n";
      return loadExpr(V->getType().Dtype, L + ".h", "k");
    }
  }
  return loadExpr(V->getType().Dtype, P.name(V), *Idx);
}

llvm::Error GroupEmitter::emitFlat(llvm::raw_ostream &OS) {
  const unsigned Block = 256;
  std::string Body;
  llvm::raw_string_ostream B(Body);
  for (const Node *N : Nodes) {
    if (N->getType().Shape != Iter.Shape)
      return err("'%" + N->getName() + "' iterates over " +
                 shapeStr(N->getType().Shape) + ", not " +
                 shapeStr(Iter.Shape));
    if (N->getOp() == OpCode::Sum || N->getOp() == OpCode::Max) {
      // A reduction of an input read directly: each output element loops
      // over the reduced dimension.
      const Value *In = N->getOperand(0);
      if (Defined.count(In) || Resized)
        return err("'%" + N->getName() +
                   "' reduces a value computed in the same kernel");
      P.Inputs.insert(In);
      const TensorType &IT = In->getType();
      auto [Dim, After, Len] = reducedDimOf(*N);
      bool IsSum = N->getOp() == OpCode::Sum;
      std::string V = var(N->getResult());
      std::string Idx = "(i / " + std::to_string(After) + "LL) * " +
                        std::to_string(Len * After) + "LL + d * " +
                        std::to_string(After) + "LL + i % " +
                        std::to_string(After) + "LL";
      std::string X = loadExpr(IT.Dtype, P.name(In), Idx);
      B << "    float " << V << " = "
        << (IsSum ? "0.f" : "-__int_as_float(0x7f800000)") << "; // %"
        << N->getName() << " = " << N->getOpName() << " over dim " << Dim
        << "\n    for (long long d = 0; d < " << Len << "LL; ++d)\n      " << V
        << " = " << (IsSum ? V + " + " + X : "fmaxf(" + V + ", " + X + ")")
        << ";\n";
      Defined[N->getResult()] = true;
      continue;
    }
    std::vector<std::string> Ops;
    for (const Operand &O : N->getOperands()) {
      llvm::Expected<std::string> E = operand(O.V, Ctx::Flat);
      if (!E)
        return E.takeError();
      Ops.push_back(*E);
    }
    llvm::Expected<std::string> E = pointwiseExpr(*N, Ops);
    if (!E)
      return E.takeError();
    B << "    const float " << var(N->getResult()) << " = " << *E << "; // %"
      << N->getName() << " = " << N->getOpName() << "\n";
    Defined[N->getResult()] = true;
  }
  int64_t Vec = vectorWidth();
  std::string Unions, Stores;
  for (const Value *V : P.Outputs) {
    if (packable(V, Vec)) {
      Unions += "    " + wordUnion(V, Vec) + " pk_" + P.name(V) + ";\n";
      B << "    pk_" << P.name(V)
        << ".h[k] = " << storeExpr(V->getType().Dtype, var(V)) << ";\n";
      Stores += packedStore(V, Vec, "i0");
    } else {
      B << "    " << P.name(V)
        << "_out[i] = " << storeExpr(V->getType().Dtype, var(V)) << ";\n";
    }
  }
  // Each thread takes VEC adjacent elements of one row at a time (see
  // vectorWidth): full-shape and row-vector operands load, and outputs
  // store, as 16-byte words.
  OS << "#define ROWS " << Rows << "LL\n#define INNER " << Inner
     << "LL\n#define VEC " << Vec
     << "\n\nextern \"C\" __global__ void __launch_bounds__(" << Block << ") "
     << Name << "(" << P.signature() << ") {\n"
     << alignedPointers();
  std::string Element = "    #pragma unroll\n    for (int k = 0; k < VEC; ++k) "
                        "{\n    const long long i = i0 + k, c = c0 + k;\n"
                        "    (void)r;\n    (void)c;\n    (void)i;\n" +
                        B.str() + "    }\n";
  double MaxFlops = 0;
  for (const Node *N : Nodes)
    MaxFlops = std::max(MaxFlops, getOpInfo(N->getOp()).FlopsPerElement);
  Unroll = flatUnroll(Rows * Inner / Vec, Vec, !Preloaded.empty(), MaxFlops);
  if (Unroll == 1) {
    OS << "  for (long long i0 = ((long long)blockIdx.x * " << Block
       << " + threadIdx.x) * VEC; i0 < ROWS * INNER;\n"
       << "       i0 += (long long)gridDim.x * " << Block << " * VEC) {\n"
       << "    const long long r = i0 / INNER, c0 = i0 - r * INNER;\n"
       << Unions << Preloads << Element << Stores << "  }\n}\n";
    return llvm::Error::success();
  }
  // UNROLL iterations a thread: every iteration's 16-byte words are loaded
  // before any is computed, so each thread has UNROLL loads of each operand
  // in flight instead of one.
  std::string Keep, Take;
  OS << "#define UNROLL " << Unroll << "\n";
  for (const Value *V : Preloaded) {
    std::string L = "ld_" + P.name(V);
    std::string Words = std::to_string(wordsOf(V, Vec));
    OS << "  " << wordUnion(V, Vec) << " " << L << "_u[UNROLL];\n";
    Keep += "    #pragma unroll\n    for (int q = 0; q < " + Words +
            "; ++q)\n      " + L + "_u[uu].u[q] = " + L + ".u[q];\n";
    Take += "    " + wordUnion(V, Vec) + " " + L +
            ";\n    #pragma unroll\n    for (int q = 0; q < " + Words +
            "; ++q)\n      " + L + ".u[q] = " + L + "_u[uu].u[q];\n";
  }
  std::string Iter = "    const long long i0 = b0 + (long long)uu * " +
                     std::to_string(Block) +
                     " * VEC;\n    if (i0 >= ROWS * INNER)\n      break;\n"
                     "    const long long r = i0 / INNER, c0 = i0 - r * "
                     "INNER;\n";
  OS << "  for (long long b0 = ((long long)"
     << "blockIdx.x * " << Block << " * UNROLL + threadIdx.x) * VEC; b0 < "
     << "ROWS * INNER;\n       b0 += (long long)gridDim.x * " << Block
     << " * UNROLL * VEC) {\n"
     << "  #pragma unroll\n  for (int uu = 0; uu < UNROLL; ++uu) {\n"
     << Iter << "    (void)r;\n    (void)c0;\n"
     << Preloads << Keep << "  }\n"
     << "  #pragma unroll\n  for (int uu = 0; uu < UNROLL; ++uu) {\n"
     << Iter << Take << Unions << Element << Stores << "  }\n  }\n}\n";
  return llvm::Error::success();
}

llvm::Error GroupEmitter::emitRows(llvm::raw_ostream &OS) {
  // Each thread holds J columns of its row: JG groups of VEC adjacent ones,
  // so that with 16-byte aligned rows the loads and stores of a group merge
  // into 16-byte accesses (2-byte ones leave most of the bandwidth unused).
  int64_t Vec = vectorWidth();
  int64_t Groups = (Inner + Vec - 1) / Vec;
  unsigned Block = unsigned(std::min<int64_t>(512, (Groups + 31) / 32 * 32));
  BlockX = Block;
  int64_t JG = (Groups + Block - 1) / Block;
  // Every column in range: no guards, which would split the merged loads.
  bool Exact = JG * Block * Vec == Inner;
  std::string Body;
  llvm::raw_string_ostream B(Body);
  auto Loop = [&](const std::string &Stmt) {
    B << "  #pragma unroll\n  for (int jg = 0; jg < JG; ++jg)\n"
      << "  #pragma unroll\n  for (int k = 0; k < VEC; ++k) {\n"
      << "    const int j = jg * VEC + k;\n"
      << "    const long long c = (threadIdx.x + (long long)jg * BLOCK) * VEC "
         "+ "
         "k;\n"
      << "    (void)j;\n    (void)c;\n"
      << "    " << Stmt << "\n  }\n";
  };
  const std::string InRange = Exact ? "true" : "c < INNER";
  llvm::DenseSet<const Value *> ReadInGroup;
  for (const Node *N : Nodes)
    if (!isLayout(N->getOp()))
      for (const Operand &O : N->getOperands())
        ReadInGroup.insert(O.V);
  for (const Node *N : Nodes) {
    const std::string Out = var(N->getResult());
    std::string Comment =
        "// %" + N->getName() + " = " + N->getOpName().str() + "\n";
    if (isLayout(N->getOp())) {
      // Read through where a row member reads it: whole rows, each element
      // at its own index (the fusion rules allow no other read).
      if (!ReadInGroup.count(N->getResult()))
        continue;
      if (N->getType().Shape != Iter.Shape)
        return err("'%" + N->getName() + "' of shape " +
                   shapeStr(N->getType().Shape) + " is not a row of " +
                   shapeStr(Iter.Shape));
      std::string V;
      llvm::Expected<std::string> Stmts = readThroughAt(
          Layout, N->getResult(), "(r * " + std::to_string(Inner) + "LL + c)",
          P, "      ", V);
      if (!Stmts)
        return Stmts.takeError();
      B << "  " << Comment << "  float " << Out << "[J];\n";
      Loop("if (" + InRange + ") {\n" + *Stmts + "      " + Out + "[j] = " + V +
           ";\n    } else {\n      " + Out + "[j] = 0.f;\n    }");
      Defined[N->getResult()] = false;
      continue;
    }
    bool Scalar = N->getType().numElements() != rowsOf(Iter) * Inner ||
                  N->getType().innerDim() != Inner;
    if (Scalar && N->getType().numElements() != rowsOf(Iter))
      return err("'%" + N->getName() + "' of shape " +
                 shapeStr(N->getType().Shape) + " is neither a row of " +
                 shapeStr(Iter.Shape) + " nor one value per row");
    OpCode Op = N->getOp();
    if (Op == OpCode::Sum || Op == OpCode::Max) {
      const Value *In = N->getOperand(0);
      if (const Attribute *D = N->getAttrs().get("dim"))
        if (!(D->isInt() && (D->getInt() == -1 ||
                             D->getInt() == int64_t(In->getType().rank()) - 1)))
          return err("'%" + N->getName() +
                     "' reduces a dimension other than the last");
      llvm::Expected<std::string> X = operand(In, Ctx::Vector);
      if (!X)
        return X.takeError();
      bool IsSum = Op == OpCode::Sum;
      B << "  " << Comment << "  float " << Out << " = "
        << (IsSum ? "0.f" : "-__int_as_float(0x7f800000)") << ";\n";
      Loop("if (" + InRange + ") " + Out + " = " +
           (IsSum ? Out + " + " + *X : "fmaxf(" + Out + ", " + *X + ")") + ";");
      B << "  " << Out << " = " << (IsSum ? "mt_block_sum(" : "mt_block_max(")
        << Out << ", red);\n";
      Defined[N->getResult()] = true;
      continue;
    }
    if (Scalar) {
      std::vector<std::string> Ops;
      for (const Operand &O : N->getOperands()) {
        llvm::Expected<std::string> E = operand(O.V, Ctx::Scalar);
        if (!E)
          return E.takeError();
        Ops.push_back(*E);
      }
      llvm::Expected<std::string> E = pointwiseExpr(*N, Ops);
      if (!E)
        return E.takeError();
      B << "  " << Comment << "  const float " << Out << " = " << *E << ";\n";
      Defined[N->getResult()] = true;
      continue;
    }
    B << "  " << Comment << "  float " << Out << "[J];\n";
    if (Op == OpCode::LayerNorm) {
      llvm::Expected<std::string> X = operand(N->getOperand(0), Ctx::Vector);
      if (!X)
        return X.takeError();
      // The weight and bias, when present, as row expressions.
      std::string W = "1.f", Bias = "0.f";
      for (unsigned I = 1; I < N->getNumOperands(); ++I) {
        llvm::Expected<std::string> E = operand(N->getOperand(I), Ctx::Vector);
        if (!E)
          return E.takeError();
        (I == 1 ? W : Bias) = *E;
      }
      std::string T = Out + "_x";
      B << "  float " << T << "[J];\n";
      Loop(T + "[j] = " + InRange + " ? " + *X + " : 0.f;");
      // Two passes over the row in registers: the mean, then the variance
      // of the deviations (no cancellation of E[x^2] - mean^2).
      B << "  float " << Out << "_s = 0.f;\n";
      Loop(Out + "_s += " + T + "[j];");
      B << "  const float " << Out << "_mean = mt_block_sum(" << Out
        << "_s, red) / (float)INNER;\n";
      B << "  float " << Out << "_ss = 0.f;\n";
      Loop("if (" + InRange + ") { const float d = " + T + "[j] - " + Out +
           "_mean; " + Out + "_ss += d * d; }");
      B << "  const float " << Out << "_scale = rsqrtf(mt_block_sum(" << Out
        << "_ss, red) / (float)INNER + " << flt(epsOf(*N)) << ");\n";
      Loop(Out + "[j] = " + InRange + " ? (" + T + "[j] - " + Out +
           "_mean) * " + Out + "_scale * " + W + " + " + Bias + " : 0.f;");
      Defined[N->getResult()] = false;
      continue;
    }
    if (Op == OpCode::RmsNorm || Op == OpCode::Softmax) {
      llvm::Expected<std::string> X = operand(N->getOperand(0), Ctx::Vector);
      if (!X)
        return X.takeError();
      std::string T = Out + "_x";
      B << "  float " << T << "[J];\n";
      Loop(T + "[j] = " + InRange + " ? " + *X + " : 0.f;");
      if (Op == OpCode::RmsNorm) {
        llvm::Expected<std::string> W = operand(N->getOperand(1), Ctx::Vector);
        if (!W)
          return W.takeError();
        B << "  float " << Out << "_ss = 0.f;\n";
        Loop(Out + "_ss += " + T + "[j] * " + T + "[j];");
        B << "  const float " << Out << "_scale = rsqrtf(mt_block_sum(" << Out
          << "_ss, red) / (float)INNER + " << flt(epsOf(*N)) << ");\n";
        Loop(Out + "[j] = " + InRange + " ? " + T + "[j] * " + Out +
             "_scale * " + *W + " : 0.f;");
      } else {
        B << "  float " << Out << "_mx = -__int_as_float(0x7f800000);\n";
        Loop("if (" + InRange + ") " + Out + "_mx = fmaxf(" + Out + "_mx, " +
             T + "[j]);");
        B << "  " << Out << "_mx = mt_block_max(" << Out << "_mx, red);\n";
        B << "  float " << Out << "_sum = 0.f;\n";
        Loop(Out + "[j] = " + InRange + " ? expf(" + T + "[j] - " + Out +
             "_mx) : 0.f; " + Out + "_sum += " + Out + "[j];");
        B << "  const float " << Out << "_inv = 1.f / mt_block_sum(" << Out
          << "_sum, red);\n";
        Loop(Out + "[j] *= " + Out + "_inv;");
      }
      Defined[N->getResult()] = false;
      continue;
    }
    std::vector<std::string> Ops;
    for (const Operand &O : N->getOperands()) {
      llvm::Expected<std::string> E = operand(O.V, Ctx::Vector);
      if (!E)
        return E.takeError();
      Ops.push_back(*E);
    }
    llvm::Expected<std::string> E = pointwiseExpr(*N, Ops);
    if (!E)
      return E.takeError();
    Loop(Out + "[j] = " + InRange + " ? " + *E + " : 0.f;");
    Defined[N->getResult()] = false;
  }
  for (const Value *V : P.Outputs) {
    if (Defined.lookup(V)) {
      B << "  if (threadIdx.x == 0)\n    " << P.name(V)
        << "_out[r] = " << storeExpr(V->getType().Dtype, var(V)) << ";\n";
    } else if (Exact && packable(V, Vec)) {
      // A group's values as 16-byte words (2-byte stores would not merge).
      B << "  #pragma unroll\n  for (int jg = 0; jg < JG; ++jg) {\n"
        << "    " << wordUnion(V, Vec) << " pk_" << P.name(V) << ";\n"
        << "    #pragma unroll\n    for (int k = 0; k < VEC; ++k)\n      pk_"
        << P.name(V) << ".h[k] = "
        << storeExpr(V->getType().Dtype, var(V) + "[jg * VEC + k]") << ";\n"
        << packedStore(
               V, Vec,
               "r * INNER + (threadIdx.x + (long long)jg * BLOCK) * VEC")
        << "  }\n";
    } else {
      Loop("if (" + InRange + ") " + P.name(V) + "_out[r * INNER + c] = " +
           storeExpr(V->getType().Dtype, var(V) + "[j]") + ";");
    }
  }
  OS << "#define ROWS " << Rows << "LL\n#define INNER " << Inner
     << "LL\n#define BLOCK " << Block << "\n#define VEC " << Vec
     << "\n#define JG " << JG
     << "\n#define J (JG * VEC) // columns per thread\n\n"
     << "// One block per row; each thread keeps J columns in registers.\n"
     << "extern \"C\" __global__ void __launch_bounds__(BLOCK) " << Name << "("
     << P.signature() << ") {\n"
     << alignedPointers() << "  __shared__ float red[32];\n"
     << "  const long long r = blockIdx.x;\n"
     << B.str() << "}\n";
  return llvm::Error::success();
}

llvm::Expected<KernelSource> GroupEmitter::emit() {
  if (Nodes.empty())
    return err("empty kernel group");
  // The kernel's form, replayed by the fusion rules' own KernelForm
  // (Schedule/Fusion.h): read through (index substitution) with a layout
  // op or a sum/max over a dimension other than the last; a block per row
  // with a row reduction or, in a group of several, a last-dim sum/max
  // (layout members then read through before it); else a thread per
  // element (a sum/max alone loops over its dimension).
  bool Group = Nodes.size() > 1;
  bool ReadThrough = !Group && isLayout(Nodes.front()->getOp());
  bool RowForm = !Group && isRowReduction(Nodes.front()->getOp());
  if (Group) {
    KernelForm Form(*Nodes.front());
    for (const Node *N : llvm::drop_begin(Nodes))
      Form.join(*N);
    ReadThrough = Form.readsThrough();
    RowForm = Form.reducesRows();
  }
  if (ReadThrough) {
    if (RowsOverride > 0)
      return err("a fused group with layout ops has no size hint");
    return generateLayoutGroupKernel(Name, Nodes, P.Outputs);
  }
  const Node *FirstReduction = nullptr;
  for (const Node *N : Nodes) {
    if (isLayout(N->getOp()) && RowForm) {
      Layout.push_back(N);
      continue;
    }
    if (!llvm::isa<BufferNode>(N) ||
        !(isPointwise(N->getOp()) || isReduction(N->getOp())))
      return err("'%" + N->getName() +
                 "' is not a pointwise op or a reduction");
    if (!FirstReduction && RowForm && isReduction(N->getOp()))
      FirstReduction = N;
  }
  if (!FirstReduction && isReduction(Nodes.front()->getOp()) &&
      Nodes.size() > 1 && RowsOverride > 0)
    FirstReduction = Nodes.front();
  Iter = FirstReduction ? FirstReduction->getOperand(0)->getType()
                        : Nodes.front()->getType();
  Inner = Iter.innerDim();
  Rows = rowsOf(Iter);
  if (RowsOverride > 0 && RowsOverride != Rows) {
    Rows = RowsOverride;
    Resized = true;
  }
  std::string Body;
  llvm::raw_string_ostream OS(Body);
  if (llvm::Error E = FirstReduction ? emitRows(OS) : emitFlat(OS))
    return std::move(E);
  KernelSource K;
  K.Name = Name;
  std::string Desc;
  for (const Node *N : Nodes)
    Desc += " %" + N->getName() + "=" + N->getOpName().str();
  K.Source =
      std::string(Prelude) + "\n// Fused group:" + Desc + "\n" + OS.str();
  K.Inputs.assign(P.Inputs.begin(), P.Inputs.end());
  K.Outputs = P.Outputs;
  K.BlockX = BlockX;
  if (FirstReduction) {
    K.GridX = unsigned(Rows);
  } else {
    int64_t Groups = (Rows * Inner + vectorWidth() - 1) / vectorWidth();
    int64_t PerBlock = int64_t(BlockX) * Unroll;
    K.GridX = unsigned(std::max<int64_t>(
        1, std::min<int64_t>((Groups + PerBlock - 1) / PerBlock, int64_t(1)
                                                                     << 20)));
  }
  return K;
}

llvm::Expected<KernelSource> mtsched::generateGroupKernel(
    llvm::StringRef Name, llvm::ArrayRef<const Node *> Nodes,
    llvm::ArrayRef<const Value *> Outputs, int64_t Rows) {
  return withProgrammaticWait(GroupEmitter(Name, Nodes, Outputs, Rows).emit());
}

std::vector<const Node *>
codegen::epilogueNodes(const MultiTemplateBufferNode &N) {
  std::vector<const Node *> Chain;
  for (const Operand &O : N.getEpilogue())
    Chain.push_back(O.V->getDef());
  return Chain;
}

llvm::Expected<KernelSource>
mtsched::generateEpilogueKernel(const MultiTemplateBufferNode &N,
                                int64_t Rows) {
  std::vector<const Node *> Chain = epilogueNodes(N);
  if (Chain.empty())
    return err("'%" + N.getName() + "' has no epilogue");
  // Run apart, the chain writes what a fused kernel would: the 'writes'
  // list and its last value (read through its layout ops, if any, as every
  // group with layout members is).
  return generateGroupKernel("epilogue_" + N.getName(), Chain,
                             N.getFusedOutputs(), Rows);
}
