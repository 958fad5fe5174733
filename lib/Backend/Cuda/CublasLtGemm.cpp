//===- CublasLtGemm.cpp ---------------------------------------------------===//
#include "CublasLtGemm.h"
#include "mtsched/Lowering/CublasLtChoice.h"

using namespace mtsched;
using namespace mtsched::cuda;

static llvm::Error err(const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Msg);
}

static llvm::Error status(const char *Call, int S) {
  return err(llvm::Twine(Call) + " failed with status " + llvm::Twine(S));
}

CublasLtGemm::~CublasLtGemm() {
  for (cublasLtMatrixLayout_t Lay : {LayW, LayA, LayC})
    if (Lay)
      L.cublasLtMatrixLayoutDestroy(Lay);
  if (Desc)
    L.cublasLtMatmulDescDestroy(Desc);
}

llvm::Error CublasLtGemm::describe(const CublasGemmShape &S, bool Bias) {
  if (int R = L.cublasLtMatmulDescCreate(&Desc, CUBLAS_COMPUTE_32F, CUDA_R_32F))
    return status("cublasLtMatmulDescCreate", R);
  int32_t OpN = CUBLAS_OP_N;
  for (int Attr : {CUBLASLT_MATMUL_DESC_TRANSA, CUBLASLT_MATMUL_DESC_TRANSB})
    if (int R = L.cublasLtMatmulDescSetAttribute(Desc, Attr, &OpN, sizeof(OpN)))
      return status("cublasLtMatmulDescSetAttribute", R);
  // The bias is per output column of row-major C: per row of cuBLASLt's
  // column-major C^T, as its bias epilogue adds it. Its type is C's.
  uint32_t Epi = Bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  if (int R = L.cublasLtMatmulDescSetAttribute(
          Desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &Epi, sizeof(Epi)))
    return status("cublasLtMatmulDescSetAttribute", R);
  struct {
    cublasLtMatrixLayout_t &Lay;
    int64_t Rows, Cols, Stride;
  } Lays[] = {{LayW, S.N, S.K, S.K * S.N},
              {LayA, S.K, S.M, S.M * S.K},
              {LayC, S.N, S.M, S.M * S.N}};
  for (auto &D : Lays) {
    if (int R = L.cublasLtMatrixLayoutCreate(&D.Lay, S.Type, uint64_t(D.Rows),
                                             uint64_t(D.Cols), D.Rows))
      return status("cublasLtMatrixLayoutCreate", R);
    if (S.Batch == 1)
      continue;
    int32_t Count = int32_t(S.Batch);
    int64_t Stride = D.Stride;
    if (int R = L.cublasLtMatrixLayoutSetAttribute(
            D.Lay, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &Count, sizeof(Count)))
      return status("cublasLtMatrixLayoutSetAttribute", R);
    if (int R = L.cublasLtMatrixLayoutSetAttribute(
            D.Lay, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &Stride,
            sizeof(Stride)))
      return status("cublasLtMatrixLayoutSetAttribute", R);
  }
  return llvm::Error::success();
}

llvm::Expected<std::shared_ptr<const CublasLtGemm>>
CublasLtGemm::create(const CublasLtApi &L, cublasLtHandle_t H,
                     const CublasGemmShape &S, int Algo, size_t WorkspaceBytes,
                     bool Bias, bool Residual) {
  if (Algo < 0 || Algo >= CublasLtListed)
    return err("no cuBLASLt algorithm index " + llvm::Twine(Algo));
  if ((Bias || Residual) && S.Batch != 1)
    return err("cuBLASLt's fused bias or residual takes one weight");
  std::shared_ptr<CublasLtGemm> G(new CublasLtGemm(L, H));
  G->HasBias = Bias;
  G->HasResidual = Residual;
  if (llvm::Error E = G->describe(S, Bias))
    return std::move(E);
  cublasLtMatmulPreference_t Pref = nullptr;
  if (int R = L.cublasLtMatmulPreferenceCreate(&Pref))
    return status("cublasLtMatmulPreferenceCreate", R);
  uint64_t Limit = WorkspaceBytes;
  int R = L.cublasLtMatmulPreferenceSetAttribute(
      Pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &Limit, sizeof(Limit));
  // The same request every time (CublasLtListed answers, this workspace),
  // whichever index is wanted: the list, and so the index's algorithm, is
  // the heuristic's answer to the request.
  cublasLtMatmulHeuristicResult_t Found[CublasLtListed] = {};
  int Count = 0;
  if (!R)
    R = L.cublasLtMatmulAlgoGetHeuristic(H, G->Desc, G->LayW, G->LayA, G->LayC,
                                         G->LayC, Pref, CublasLtListed, Found,
                                         &Count);
  L.cublasLtMatmulPreferenceDestroy(Pref);
  if (R)
    return status("cublasLtMatmulAlgoGetHeuristic", R);
  if (Algo >= Count)
    return err("cuBLASLt's heuristic lists " + llvm::Twine(Count) +
               " algorithm" + (Count == 1 ? "" : "s") +
               " for this GEMM; there is no algorithm " + llvm::Twine(Algo));
  if (Found[Algo].state)
    return status("cuBLASLt's heuristic answer", Found[Algo].state);
  G->Algo = Found[Algo].algo;
  G->Workspace = Found[Algo].workspaceSize;
  return std::shared_ptr<const CublasLtGemm>(std::move(G));
}

int CublasLtGemm::run(const void *A, const void *W, void *C, void *Workspace,
                      CUstream Stream, const void *Bias,
                      const void *Residual) const {
  if (HasBias != (Bias != nullptr) || HasResidual != (Residual != nullptr))
    return -1; // not the call that was created (a bug of the caller)
  // The bias pointer is the descriptor's; it is set before each call, as
  // the graph run may have bound other buffers since the last.
  if (HasBias)
    if (int R = L.cublasLtMatmulDescSetAttribute(
            Desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &Bias, sizeof(Bias)))
      return R;
  float One = 1, Zero = 0;
  // D = A W + beta C: the residual is C, read beside the output D.
  const void *CIn = HasResidual ? Residual : C;
  return L.cublasLtMatmul(H, Desc, &One, W, LayW, A, LayA,
                          HasResidual ? &One : &Zero, CIn, LayC, C, LayC, &Algo,
                          Workspace, this->Workspace, Stream);
}
