//===- SortKernels.cpp - The kernels of topk and sort ---------------------===//
//
// A grid of rows (x) by chunks of 256 elements of the row (y). Each thread
// takes elements of its row and counts the elements that come before each
// in the op's total order (largest or smallest first, NaN beyond every
// number, ties by index): that count is the element's place, so the row is
// ordered without a sort network, and topk keeps the places below k. A row
// of n elements costs n comparisons per element, spread over n / 256
// blocks: routing rows (experts) take microseconds, and one row of the
// 32,768 expert ids a prefill's top-8 routing orders takes about a
// millisecond. The interpreter orders the same way, so values and indices
// match it exactly.
//
//===----------------------------------------------------------------------===//
#include "GemmCodegen.h"
#include "llvm/Support/Error.h"
#include <algorithm>

using namespace mtsched;
using namespace mtsched::codegen;

llvm::Expected<KernelSource> mtsched::generateSortKernel(llvm::StringRef Name,
                                                         const Node &N) {
  auto Err = [&](const llvm::Twine &Msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "'%" + N.getName() + "': " + Msg);
  };
  if (!isSort(N.getOp()) || N.getNumResults() != 2 || N.getNumOperands() != 1 ||
      N.getOperand(0)->getType().rank() == 0)
    return Err("not a well-formed topk or sort");
  const TensorType &In = N.getOperand(0)->getType();
  int64_t Len = In.Shape.back(), Rows = In.numElements() / Len;
  int64_t K = N.getType().Shape.back();
  bool Largest;
  if (N.getOp() == OpCode::TopK) {
    const Attribute *A = N.getAttrs().get("largest");
    Largest = !A || A->getBool();
  } else {
    const Attribute *A = N.getAttrs().get("descending");
    Largest = A && A->getBool();
  }
  const unsigned Block = 256;
  std::string Fn = sanitizeIdentifier(Name);
  ParamList Params;
  Params.Inputs.insert(N.getOperand(0));
  Params.Outputs.push_back(N.getResult(0));
  Params.Outputs.push_back(N.getResult(1));
  // Keys compare in float for floating-point rows (bf16 and f16 widen
  // exactly) and in their own type for integer rows.
  bool Float = isFloatDType(In.Dtype);
  std::string Key = Float ? "float" : "long long";
  std::string X = Params.name(N.getOperand(0));
  std::string Load = Float ? loadExpr(In.Dtype, "row", "{0}")
                           : std::string("(long long)row[{0}]");
  auto LoadAt = [&](const std::string &Idx) {
    std::string S = Load;
    S.replace(S.find("{0}"), 3, Idx);
    return S;
  };

  std::string S;
  llvm::raw_string_ostream OS(S);
  OS << Prelude << "\n// " << N.getOpName() << " %" << N.getName() << ", %"
     << N.getResult(1)->getName() << ": " << (Largest ? "largest" : "smallest")
     << " first; rows x chunks of the row, each element placed by\n"
     << "// counting those before it\n"
     << "__device__ __forceinline__ bool mt_before(" << Key
     << " x, long long a, " << Key << " y, long long b) {\n"
     << "  const bool nx = x != x, ny = y != y; // NaN\n"
     << "  if (nx != ny)\n    return " << (Largest ? "nx" : "ny") << ";\n"
     << "  if (!nx && x != y)\n    return x " << (Largest ? ">" : "<")
     << " y;\n"
     << "  return a < b;\n}\n"
     << "extern \"C\" __global__ void __launch_bounds__(" << Block << ") " << Fn
     << "(" << Params.signature() << ") {\n"
     << "  const long long r = blockIdx.x;\n"
     << "  const " << storageType(In.Dtype) << " *row = " << X << " + r * "
     << Len << "LL;\n"
     << "  for (long long i = (long long)blockIdx.y * " << Block
     << " + threadIdx.x; i < " << Len << "LL;\n"
     << "       i += (long long)gridDim.y * " << Block << ") {\n"
     << "    const " << Key << " v = " << LoadAt("i") << ";\n"
     << "    long long place = 0;\n"
     << "    for (long long j = 0; j < " << Len << "LL; ++j)\n"
     << "      place += mt_before(" << LoadAt("j") << ", j, v, i);\n"
     << "    if (place < " << K << "LL) {\n"
     << "      " << Params.name(N.getResult(0)) << "_out[r * " << K
     << "LL + place] = row[i];\n"
     << "      " << Params.name(N.getResult(1)) << "_out[r * " << K
     << "LL + place] = i;\n"
     << "    }\n  }\n}\n";

  KernelSource KS;
  KS.Name = Fn;
  KS.Source = OS.str();
  KS.Inputs.assign(Params.Inputs.begin(), Params.Inputs.end());
  KS.Outputs = Params.Outputs;
  KS.BlockX = Block;
  KS.GridX = unsigned(Rows);
  KS.GridY = unsigned(std::min<int64_t>((Len + Block - 1) / Block, 65535));
  return KS;
}
