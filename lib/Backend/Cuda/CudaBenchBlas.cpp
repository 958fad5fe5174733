//===- CudaBenchBlas.cpp - cuBLAS and cuBLASLt choices timed --------------===//
//
// blasLaunch(): a matmul node's library choice (`extern.cublas`, or
// `extern.cublaslt_aN`, cuBLASLt's N-th heuristic algorithm, unfused or
// with a bias / residual epilogue) as a launch on a prepared node's copies
// of its operands, for measure() and measureForms() alike. The graph run
// issues the same calls
// (GraphRunLaunches.cpp), so what is timed is what runs.
//
//===----------------------------------------------------------------------===//
#include "CublasGemm.h"
#include "CublasLtGemm.h"
#include "CudaBenchmarkerImpl.h"
#include "mtsched/Autotune/BlasEpilogue.h"
#include "mtsched/Lowering/CublasLtChoice.h"
#include <algorithm>

using namespace mtsched;
using namespace mtsched::cuda;

bool cuda::isBlasChoice(llvm::StringRef Name) {
  return Name == "extern.cublas" || isCublasLtName(Name);
}

std::function<CUresult(int)> cuda::blasLaunch(Gpu &G, Prepared &P,
                                              const MultiTemplateBufferNode &N,
                                              llvm::StringRef Name, bool Fused,
                                              std::string &Why) {
  std::optional<int> Algo = cublasLtAlgoOf(Name);
  if (Name != "extern.cublas" && !Algo) {
    Why = "unknown extern choice '" + Name.str() + "'";
    return nullptr;
  }
  std::optional<BlasEpilogue> Epi;
  if (Fused && (!Algo || !(Epi = blasEpilogueOf(N)))) {
    Why = "'" + Name.str() + "' cannot fuse this epilogue";
    return nullptr;
  }
  if (!G.blas()) {
    Why = G.BlasError;
    return nullptr;
  }
  llvm::Expected<CublasGemmShape> Shape = cublasGemmShapeOf(N);
  if (!Shape) {
    Why = llvm::toString(Shape.takeError());
    return nullptr;
  }
  const Value *A = N.getOperand(0), *B = N.getOperand(1);
  int Copies = std::max(1, P.Copies);
  auto Ptr = [&P](const Value *V, int Copy) {
    return reinterpret_cast<void *>(P.Dev[V][Copy].P);
  };
  if (!Algo)
    return [&G, &P, Ptr, A, B, Copies, S = *Shape](int Copy) -> CUresult {
      Copy %= Copies;
      int R = cublasGemm(*G.B, G.Blas, S, Ptr(A, Copy), Ptr(B, Copy),
                         reinterpret_cast<void *>(P.OutMain[Copy].P));
      return R ? CUresult(999) : CUDA_SUCCESS;
    };
  if (!G.blasLt()) {
    Why = G.BlasLtError;
    return nullptr;
  }
  const Value *Bias = Epi ? Epi->Bias : nullptr;
  const Value *Res = Epi ? Epi->Residual : nullptr;
  llvm::Expected<std::shared_ptr<const CublasLtGemm>> Lt = CublasLtGemm::create(
      *G.Lt, G.BlasLt, *Shape, *Algo,
      G.BlasWorkspace ? G.BlasWorkspaceBytes : 0, Bias, Res);
  if (!Lt) {
    Why = llvm::toString(Lt.takeError());
    return nullptr;
  }
  DevBuf *Out = Fused ? P.OutFused : P.OutMain;
  return [&G, Ptr, A, B, Bias, Res, Out, Copies, L = *Lt](int Copy) {
    Copy %= Copies;
    int R = L->run(
        Ptr(A, Copy), Ptr(B, Copy), reinterpret_cast<void *>(Out[Copy].P),
        reinterpret_cast<void *>(G.BlasWorkspace), G.Stream,
        Bias ? Ptr(Bias, Copy) : nullptr, Res ? Ptr(Res, Copy) : nullptr);
    return R ? CUresult(999) : CUDA_SUCCESS;
  };
}
