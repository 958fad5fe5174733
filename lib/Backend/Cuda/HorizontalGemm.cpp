//===- HorizontalGemm.cpp - GEMMs over one input as one launch ------------===//
//
// The merged GEMM of a horizontal group (select-horizontal,
// mtsched/Autotune/HorizontalSelect.h): members C_i = A * B_i, all reading
// one A, run as one mma.sync kernel. The grid's columns of tiles are the
// members' tiles one after the other; a CTA finds its member from its
// column, then runs the GEMM template's main loop on that member's B and
// writes its tile straight to that member's output. Each member's code is
// the template instantiated with its own N (a namespace per member, N_
// redefined), so nothing is sliced and no weight is concatenated: the
// weights are read where they lie, through their own pointers.
//
//===----------------------------------------------------------------------===//
#include "GemmCodegen.h"
#include "mtsched/Autotune/HorizontalSelect.h"
#include "mtsched/Autotune/PrologueSelect.h"
#include "mtsched/Backend/Cuda/OpUnitKernels.h"
#include "llvm/ADT/STLExtras.h"

using namespace mtsched;
using namespace mtsched::codegen;

static llvm::Error err(const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Msg);
}

/// One member's CTA tile, in the member's namespace (N_ is its column
/// count): this head, the mma.sync template's main loop (its shared
/// accumulators and k-step around MmaSyncTileLoop, with one B, as the SwiGLU
/// kernel runs it) and a bounds-checked store of the accumulators.
static const char *TileHead = R"(
__device__ __forceinline__ void hz_tile(const unsigned short *A,
                                        const unsigned short *B, STORE_T *C,
                                        long long m0, long long n0,
                                        unsigned char *mt_smem, float *mt_ws,
                                        const unsigned short *W,
                                        const float *pl_inv) {
  (void)mt_ws;
  (void)W;
  (void)pl_inv;
  const int split = blockIdx.z; // the slice of K (split-K)
  (void)split;
  unsigned short *sA = (unsigned short *)mt_smem;
  unsigned short *sB = sA + STAGES * BM * AS;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp / WARPS_N, wn = warp % WARPS_N;
  (void)tid;
)";

static llvm::Expected<KernelSource> generateHorizontalGemmKernelText(
    llvm::StringRef Name,
    llvm::ArrayRef<const MultiTemplateBufferNode *> Members,
    const GemmTileConfig &T, const Node *Norm) {
  if (Members.size() < 2)
    return err("a horizontal group needs two GEMMs or more");
  const Value *AV = Members.front()->getOperand(0);
  const TensorType &A = AV->getType();
  // The members read the norm's result; the kernel reads x and w.
  if (Norm)
    if (llvm::Error E = checkPrologueNorm(*Norm, AV, "the group's A"))
      return std::move(E);
  DType Dt = A.Dtype;
  if (!(Dt == DType::BF16 || Dt == DType::F16))
    return err("the merged GEMM needs bf16 or f16 operands, got " +
               dtypeName(Dt));
  for (const MultiTemplateBufferNode *X : Members) {
    if (X->getOp() != OpCode::MatMul || X->getNumOperands() != 2)
      return err("'%" + X->getName() + "' is not a plain matmul");
    if (X->getOperand(0) != AV)
      return err("'%" + X->getName() + "' does not read '%" + AV->getName() +
                 "' as the other GEMMs of its group do");
    const TensorType &B = X->getOperand(1)->getType();
    if (B.rank() != 2 || B.Dtype != Dt || X->getType().Dtype != Dt ||
        B.Shape[0] != A.innerDim())
      return err("the weight of '%" + X->getName() + "' is not a " +
                 dtypeName(Dt) + "[" + llvm::Twine(A.innerDim()) +
                 ", N] matrix");
    if (X->isEpilogueFused())
      return err("'%" + X->getName() +
                 "' has a fused epilogue, which the merged GEMM cannot run");
  }
  if (T.Template != GemmTemplate::MmaSync || T.Persistent)
    return err("the merged GEMM has an mma.sync template only");
  int Split = std::max(1, T.SplitK);
  if (T.BM <= 0 || T.BN <= 0 || T.BK <= 0 || T.Warps <= 0 || T.Stages <= 0)
    return err("tile sizes must be positive");
  int WarpsM = 0, WarpsN = 0;
  if (T.BK % 16 || !warpLayout(T, WarpsM, WarpsN))
    return err("tile " + gemmChoiceName(T) +
               " does not split into 16x16 warp tiles with " +
               llvm::Twine(T.Warps) + " warps");
  int64_t Kd = A.innerDim(), M = rowsOf(A);
  int Stages = std::max(2, T.Stages);
  bool Aligned = Kd % 8 == 0 && llvm::all_of(Members, [](const auto *X) {
                   return X->getType().innerDim() % 8 == 0;
                 });
  int64_t Smem = int64_t(Stages) *
                 (int64_t(T.BM) * (T.BK + 8) + int64_t(T.BK) * (T.BN + 8)) * 2;

  ParamList P;
  const Value *XV = Norm ? Norm->getOperand(0) : AV;
  P.Inputs.insert(XV);
  if (Norm)
    P.Inputs.insert(Norm->getOperand(1));
  for (const MultiTemplateBufferNode *X : Members)
    P.Inputs.insert(X->getOperand(1));
  for (const MultiTemplateBufferNode *X : Members)
    P.Outputs.push_back(X->getResult());

  KernelSource K;
  K.Name = sanitizeIdentifier(Name.str() + "_" + gemmChoiceName(T));
  std::string S;
  llvm::raw_string_ostream OS(S);
  OS << Prelude << "\n// Horizontal GEMM of " << Members.size()
     << " members over [" << M << " x " << Kd << "] %" << AV->getName()
     << ", tile " << gemmChoiceName(T) << ":";
  for (const MultiTemplateBufferNode *X : Members)
    OS << " %" << X->getName() << " [" << X->getType().innerDim() << "]";
  OS << "\n#define M_ " << M << "LL\n#define K_ " << Kd
     << "LL\n#define ROWS M_\n#define BM " << T.BM << "\n#define BN " << T.BN
     << "\n#define BK " << T.BK << "\n#define WARPS_M " << WarpsM
     << "\n#define WARPS_N " << WarpsN << "\n#define STAGES " << Stages
     << "\n#define ALIGNED8 " << (Aligned ? 1 : 0)
     << " // K and every N multiples of 8: 16-byte copies\n"
     << "#define MMA_TYPE \"" << (Dt == DType::BF16 ? "bf16" : "f16")
     << "\"\n#define STORE_T " << storageType(Dt) << "\n#define HZ_STORE(v) "
     << storeExpr(Dt, "(v)") << "\n#define SPLITK " << Split
     << "\n#define PROLOGUE " << (Norm ? 1 : 0) << "\n"
     << MmaSyncTileAccMacro;
  if (Norm)
    emitPrologueDefines(OS, *Norm);
  // One instantiation of the template per member, N_ its columns.
  for (size_t I = 0; I < Members.size(); ++I) {
    OS << "#undef N_\n#define N_ " << Members[I]->getType().innerDim()
       << "LL\nnamespace hz" << I << " {\n";
    emitTensorCoreMainLoop(OS);
    if (Norm)
      OS << PrologueHelpers;
    OS << TileHead << MmaSyncAccumulators << MmaSyncTileLoop << MmaSyncKStep;
    if (Norm)
      // 1/rms per accumulator row, before the split-K partials.
      OS << PrologueScaleAcc;
    // Split-K: each slice's partial tile to the workspace, the last of a
    // tile's slices adds them (the tile index is the CTA's grid position,
    // unique across members) and stores.
    emitSplitKReduce(OS, EpilogueThreads());
    OS << mmaSyncTileStore("C", "HZ_STORE") << "} // namespace hz" << I << "\n";
  }
  OS << "#undef N_\n";
  OS << "extern \"C\" __global__ void __launch_bounds__(THREADS) " << K.Name
     << "(" << P.signature() << (Split > 1 ? ", float *__restrict__ mt_ws" : "")
     << ") {\n"
     << "  extern __shared__ __align__(16) unsigned char mt_smem[];\n"
     << "  const long long m0 = (long long)blockIdx.y * BM;\n"
     << "  const unsigned short *A = (const unsigned short *)" << P.name(XV)
     << ";\n"
     << "  int bx = blockIdx.x;\n";
  if (Norm)
    // 1/rms of the CTA's rows of x, shared by whichever member it runs.
    OS << "  __shared__ float pl_inv[BM];\n"
       << "  const unsigned short *W = (const unsigned short *)"
       << P.name(Norm->getOperand(1)) << ";\n"
       << "  hz0::pl_row_scales(A, m0, pl_inv);\n  __syncthreads();\n";
  unsigned GridX = 0;
  for (size_t I = 0; I < Members.size(); ++I) {
    const MultiTemplateBufferNode *X = Members[I];
    int64_t Tiles = (X->getType().innerDim() + T.BN - 1) / T.BN;
    GridX += unsigned(Tiles);
    OS << "  if (bx < " << Tiles << ") { // %" << X->getName() << "\n"
       << "    hz" << I << "::hz_tile(A, (const unsigned short *)"
       << P.name(X->getOperand(1)) << ", " << P.name(X->getResult())
       << "_out, m0, (long long)bx * BN, mt_smem, "
       << (Split > 1 ? "mt_ws" : "nullptr")
       << (Norm ? ", W, pl_inv" : ", nullptr, nullptr") << ");\n"
       << "    return;\n  }\n  bx -= " << Tiles << ";\n";
  }
  OS << "}\n";
  K.Source = OS.str();
  K.Inputs.assign(P.Inputs.begin(), P.Inputs.end());
  K.Outputs = P.Outputs;
  K.GridX = GridX;
  K.GridY = unsigned((M + T.BM - 1) / T.BM);
  K.GridZ = unsigned(Split);
  K.BlockX = WarpsM * WarpsN * 32;
  K.SharedBytes = unsigned(Smem);
  if (Split > 1)
    // Per CTA its fp32 partial tile, per output tile a counter.
    K.WorkspaceBytes = uint64_t(K.GridX) * K.GridY * Split * T.BM * T.BN * 4 +
                       uint64_t(K.GridX) * K.GridY * 4;
  return K;
}

llvm::Expected<KernelSource>
mtsched::generateHorizontalGroupKernel(const Graph &G,
                                       const MultiTemplateBufferNode &Leader) {
  const Attribute *List = Leader.getAttrs().get(HorizontalAttr);
  if (!List || !List->isList())
    return err("'%" + Leader.getName() + "' leads no horizontal group");
  // The members, by name, in the leader's order: the leader, then nodes
  // that say they are merged into it.
  std::vector<const MultiTemplateBufferNode *> Members;
  for (const Attribute &E : List->getList()) {
    const MultiTemplateBufferNode *X = nullptr;
    for (const auto &N : G.getNodes())
      if (E.isString() && N->getName() == E.getString())
        X = llvm::dyn_cast<MultiTemplateBufferNode>(N.get());
    if (!X ||
        (X != &Leader && X->getAttrs().getString(HorizontalOfAttr) !=
                             std::optional<llvm::StringRef>(Leader.getName())))
      return err("the horizontal group of '%" + Leader.getName() +
                 "' names a member that is not merged into it");
    Members.push_back(X);
  }
  if (Members.empty() || Members.front() != &Leader)
    return err("the horizontal group of '%" + Leader.getName() +
               "' does not start with it");
  std::optional<llvm::StringRef> TileName =
      Leader.getAttrs().getString(HorizontalTileAttr);
  // The tile is named, not looked up: fuse-horizontal's tiles are those
  // of the merged problem, which the leader's list need not hold.
  std::optional<GemmTileConfig> T =
      TileName ? gemmTileOf(Choice{TileName->str(), {}, {}}) : std::nullopt;
  if (!T)
    return err("'%" + Leader.getName() +
               "': the merged GEMM's tile is not a GEMM tile");
  // The norm of the group's A in its prologue (select-prologue): every
  // member names it.
  const Node *Norm = nullptr;
  if (std::optional<llvm::StringRef> PN =
          Leader.getAttrs().getString(PrologueAttr)) {
    Norm = Leader.getOperand(0)->getDef();
    if (!Norm || Norm->getName() != *PN)
      return err("'%" + Leader.getName() + "' names prologue '%" + *PN +
                 "', which is not its A operand's node");
    for (const MultiTemplateBufferNode *X : Members)
      if (X->getAttrs().getString(PrologueAttr) != PN)
        return err("'%" + X->getName() + "' does not run the prologue '%" +
                   *PN + "' of its horizontal group");
  }
  return generateHorizontalGemmKernel(Leader.getName() + "_horizontal", Members,
                                      *T, Norm);
}

llvm::Expected<KernelSource> mtsched::generateHorizontalGemmKernel(
    llvm::StringRef Name,
    llvm::ArrayRef<const MultiTemplateBufferNode *> Members,
    const GemmTileConfig &T, const Node *Norm) {
  double Flops = 0;
  for (const MultiTemplateBufferNode *X : Members)
    Flops += gemmFlops(*X);
  return withProgrammaticWait(
      generateHorizontalGemmKernelText(Name, Members, T, Norm), Flops);
}
