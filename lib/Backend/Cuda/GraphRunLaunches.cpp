//===- GraphRunLaunches.cpp - GraphRun's collectives and library calls ----===//
//
// The launches of a decided graph (GraphRun, CudaGraphRun.h) that are not a
// node's generated kernel: collectives (through NCCL across ranks, a copy on
// one), cuBLAS's or cuBLASLt's GEMM and an op unit's library choice
// (extern.cudnn). Both
// `--run` and the runtime library's prepared graph issue them, and each is
// kept for replay with its buffers looked up when it is issued.
//
//===----------------------------------------------------------------------===//
#include "CublasGemm.h"
#include "CublasLtGemm.h"
#include "CudaGraphRun.h"
#include "mtsched/Autotune/BlasEpilogue.h"
#include "mtsched/Lowering/CublasLtChoice.h"

using namespace mtsched;
using namespace mtsched::cuda;

static llvm::Error err(const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Msg);
}

bool GraphRun::isOneRankView(const CollectiveMultiTemplateBufferNode &C) const {
  return G.getWorldSize() <= 1 && C.getNumOperands() == 1 &&
         !C.isEpilogueFused() &&
         C.getType().numBytes() == C.getOperand(0)->getType().numBytes();
}

llvm::Error
GraphRun::runCollective(const CollectiveMultiTemplateBufferNode &C) {
  if (G.getWorldSize() > 1) {
    if (!NComm)
      return err("'%" + C.getName() +
                 "': --run executes collectives only on one rank");
    if (llvm::Error E = runNcclCollective(C))
      return E;
    if (C.isEpilogueFused())
      return runKernel(generateEpilogueKernel(C));
    return llvm::Error::success();
  }
  // On one rank a collective is the identity (a ragged all_to_all a copy of
  // the counted rows). Without an epilogue, which would write the result in
  // place, its result is a view of its operand, as a reshape's is: PyTorch
  // and Inductor skip a one-rank collective too, and the copy cost the
  // gallery's MoE layers 2 x 512 MB at prefill.
  if (isOneRankView(C)) {
    Dev[C.getResult()] = Dev[C.getOperand(0)];
    Alias[C.getResult()] = C.getOperand(0);
    return llvm::Error::success();
  }
  if (C.getNumOperands() == 3) {
    if (llvm::Error E =
            runKernel(generateRaggedCopyKernel("ragged_" + C.getName(), C)))
      return E;
  } else {
    if (llvm::Error E = alloc(C.getResult()))
      return E;
    CUdeviceptr Dst = Dev[C.getResult()], Src = Dev[C.getOperand(0)];
    size_t Bytes = size_t(C.getType().numBytes());
    D.cuMemcpyDtoDAsync(Dst, Src, Bytes, Gp.Stream);
    syncStream(D, Gp.Stream, "a copy of '%" + C.getName() + "'");
    // The buffers are looked up when the copy is issued: the runtime
    // library may have bound others since.
    const Value *DstV = C.getResult(), *SrcV = C.getOperand(0);
    Replay.push_back([this, DstV, SrcV, Bytes] {
      return D.cuMemcpyDtoDAsync(resolve(DstV), resolve(SrcV), Bytes,
                                 Gp.Stream);
    });
    ++Launched;
  }
  if (C.isEpilogueFused())
    return runKernel(generateEpilogueKernel(C));
  return llvm::Error::success();
}

llvm::Error
GraphRun::runNcclCollective(const CollectiveMultiTemplateBufferNode &C) {
  using namespace nccl;
  // Only NCCL runs across processes here: the peer-memory choices need
  // the peers' buffers mapped into this process (cudaIpc handles), which
  // the runtime library does not exchange yet. The torch backend decides
  // with them disabled (docs/RUNTIME.md "Several ranks").
  std::optional<CollectiveAlgo> A = collectiveAlgoOf(C.getDecision());
  if (!A || *A != CollectiveAlgo::Nccl)
    return err("'%" + C.getName() +
               "': the runtime runs collectives of "
               "several ranks through NCCL only, not decision '" +
               C.getDecision() +
               "' (decide with --disable-choices=one_shot,two_shot,p2p,"
               "hier)");
  if (const Attribute *R = C.getAttrs().get("reduce"))
    if (R->getString() != "sum")
      return err("'%" + C.getName() + "': reduce \"" + R->getString() +
                 "\" is not run through NCCL here, only \"sum\"");
  DType T = C.getType().Dtype;
  CollectiveKind K = C.getCollectiveKind();
  if (!isFloatDType(T) && K != CollectiveKind::AllToAll)
    return err("'%" + C.getName() +
               "': NCCL reduces and gathers float "
               "tensors here, not " +
               std::string(dtypeName(T)));
  if (T != DType::F32 && T != DType::F16 && T != DType::BF16 &&
      K != CollectiveKind::AllToAll)
    return err("'%" + C.getName() + "': no NCCL type for " +
               std::string(dtypeName(T)));
  if (C.getNumOperands() != 1)
    return err("'%" + C.getName() +
               "': an uneven (counted) all_to_all does "
               "not run across processes here");
  // NCCL gathers and scatters whole contiguous chunks, i.e. along the
  // outermost dimension; another dim is a chunk only where every dimension
  // before it is 1.
  if (std::optional<int64_t> Dim = C.getAttrs().getInt("dim")) {
    const TensorType &In = C.getOperand(0)->getType();
    for (int64_t I = 0; I < *Dim && I < int64_t(In.rank()); ++I)
      if (In.Shape[size_t(I)] != 1)
        return err("'%" + C.getName() + "': " + collectiveKindName(K).str() +
                   " along dim " + std::to_string(*Dim) +
                   " does not run through NCCL here (dim 0 only)");
  }
  if (llvm::Error E = alloc(C.getResult()))
    return E;
  int DT = T == DType::BF16  ? ncclBfloat16
           : T == DType::F16 ? ncclFloat16
                             : ncclFloat32;
  size_t InElems = size_t(C.getOperand(0)->getType().numElements());
  size_t OutElems = size_t(C.getType().numElements());
  size_t InBytes = size_t(C.getOperand(0)->getType().numBytes());
  int Ranks = int(G.getWorldSize());
  const Value *DstV = C.getResult(), *SrcV = C.getOperand(0);
  const NcclApi *N = Nc;
  ncclComm_t Comm = NComm;
  // The buffers are looked up when the call is issued: the runtime library
  // binds the caller's since.
  std::function<CUresult()> Call;
  switch (K) {
  case CollectiveKind::AllReduce:
    Call = [=] {
      return CUresult(N->ncclAllReduce((void *)resolve(SrcV),
                                       (void *)resolve(DstV), InElems, DT,
                                       ncclSum, Comm, Gp.Stream));
    };
    break;
  case CollectiveKind::AllGather:
    Call = [=] {
      return CUresult(N->ncclAllGather((void *)resolve(SrcV),
                                       (void *)resolve(DstV), InElems, DT, Comm,
                                       Gp.Stream));
    };
    break;
  case CollectiveKind::ReduceScatter:
    Call = [=] {
      return CUresult(N->ncclReduceScatter((void *)resolve(SrcV),
                                           (void *)resolve(DstV), OutElems, DT,
                                           ncclSum, Comm, Gp.Stream));
    };
    break;
  case CollectiveKind::AllToAll:
    Call = [=] {
      size_t Chunk = InBytes / size_t(Ranks);
      CUdeviceptr In = resolve(SrcV), Out = resolve(DstV);
      CUresult R = CUresult(N->ncclGroupStart());
      for (int P = 0; P < Ranks && !R; ++P)
        R = CUresult(N->ncclSend((void *)(In + P * Chunk), Chunk, ncclUint8, P,
                                 Comm, Gp.Stream));
      for (int P = 0; P < Ranks && !R; ++P)
        R = CUresult(N->ncclRecv((void *)(Out + P * Chunk), Chunk, ncclUint8, P,
                                 Comm, Gp.Stream));
      CUresult RE = CUresult(N->ncclGroupEnd());
      return R ? R : RE;
    };
    break;
  default:
    return err("'%" + C.getName() + "': " + collectiveKindName(K).str() +
               " does not run through NCCL here");
  }
  // Once now, synchronously (every rank prepares at the same time), so that
  // a failing call names its node; NCCL's codes are not CUDA's.
  if (CUresult R = Call())
    return err("'%" + C.getName() +
               "': " + N->errorString(nccl::ncclResult_t(R)));
  if (CUresult R = syncStream(D, Gp.Stream, "NCCL for '%" + C.getName() + "'"))
    return err("'%" + C.getName() + "' failed: " + D.errorString(R));
  Replay.push_back(std::move(Call));
  ++Launched;
  return llvm::Error::success();
}

llvm::Error GraphRun::runCublas(const MultiTemplateBufferNode &M) {
  const std::string &Name = M.getDecision();
  std::optional<int> Algo = cublasLtAlgoOf(Name);
  // cuBLASLt runs a bias / residual epilogue in its call (BlasEpilogue.h);
  // the fused node's result is then the epilogue's last value.
  std::optional<BlasEpilogue> Epi;
  if (M.isEpilogueFused() && (!Algo || !(Epi = blasEpilogueOf(M))))
    return err("'%" + M.getName() + "': " + Name +
               " cannot run its fused epilogue");
  const Value *VA = M.getOperand(0), *VB = M.getOperand(1);
  const Value *VC = Epi ? M.getEpilogue().back().V : M.getResult();
  if (llvm::Error E = alloc(VC))
    return E;
  llvm::Expected<CublasGemmShape> Shape = cublasGemmShapeOf(M);
  if (!Shape)
    return Shape.takeError();
  // The buffers are looked up when the GEMM is issued: the runtime library
  // may have bound others since.
  Gpu &Dev0 = Gp;
  std::function<int()> Gemm;
  if (Algo) {
    // The algorithm timed: the same request to the heuristic (shape,
    // epilogue, workspace, list length) on the same library and GPU.
    if (!Gp.blasLt())
      return err("'%" + M.getName() + "': cannot run '" + Name +
                 "': " + Gp.BlasLtError);
    const Value *Bias = Epi ? Epi->Bias : nullptr;
    const Value *Res = Epi ? Epi->Residual : nullptr;
    llvm::Expected<std::shared_ptr<const CublasLtGemm>> Lt =
        CublasLtGemm::create(*Gp.Lt, Gp.BlasLt, *Shape, *Algo,
                             Gp.BlasWorkspace ? Gp.BlasWorkspaceBytes : 0, Bias,
                             Res);
    if (!Lt)
      return err("'%" + M.getName() + "': cannot run '" + Name +
                 "': " + llvm::toString(Lt.takeError()));
    auto Ptr = [this](const Value *V) {
      return V ? reinterpret_cast<void *>(resolve(V)) : nullptr;
    };
    Gemm = [&Dev0, Ptr, L = *Lt, VA, VB, VC, Bias, Res] {
      return L->run(Ptr(VA), Ptr(VB), Ptr(VC),
                    reinterpret_cast<void *>(Dev0.BlasWorkspace), Dev0.Stream,
                    Ptr(Bias), Ptr(Res));
    };
  } else {
    Gemm = [this, &Dev0, S = *Shape, VA, VB, VC] {
      return cublasGemm(*Dev0.B, Dev0.Blas, S,
                        reinterpret_cast<void *>(resolve(VA)),
                        reinterpret_cast<void *>(resolve(VB)),
                        reinterpret_cast<void *>(resolve(VC)));
    };
  }
  if (int S = Gemm())
    return err("'%" + M.getName() + "': " + Name + " failed with status " +
               std::to_string(S));
  syncStream(D, Gp.Stream, Name + " for '%" + M.getName() + "'");
  Replay.push_back([Gemm] { return CUresult(Gemm() ? 1 : 0); });
  ++Launched;
  return llvm::Error::success();
}

llvm::Error GraphRun::runOpUnitExtern(const MultiTemplateBufferNode &M) {
  llvm::Expected<OpUnitExternCall> Call =
      prepareOpUnitExtern(M, M.getDecision());
  if (!Call)
    return err("'%" + M.getName() + "': cannot run '" + M.getDecision() +
               "': " + llvm::toString(Call.takeError()));
  llvm::Expected<size_t> Bytes = Call->Plan(Gp.Stream);
  if (!Bytes)
    return err("'%" + M.getName() + "': cannot run '" + M.getDecision() +
               "': " + llvm::toString(Bytes.takeError()));
  if (llvm::Error E = alloc(M.getResult()))
    return E;
  CUdeviceptr Work = 0;
  if (*Bytes)
    if (llvm::Error E =
            allocBytes(*Bytes, Work,
                       "the " + llvm::Twine(*Bytes) + "-byte workspace of '%" +
                           M.getName() + "'"))
      return E;
  // The buffers are looked up when the call is issued: the runtime library
  // may have bound others since.
  std::vector<const Value *> Ins;
  for (const Operand &O : M.getOperands())
    Ins.push_back(O.V);
  const Value *Res = M.getResult();
  Gpu &Dev0 = Gp;
  auto Issue = [this, &Dev0, Ins, Res, Work, Run = Call->Run] {
    std::vector<void *> Ptrs;
    for (const Value *V : Ins)
      Ptrs.push_back(reinterpret_cast<void *>(resolve(V)));
    return Run(Dev0.Stream, Ptrs, reinterpret_cast<void *>(resolve(Res)),
               reinterpret_cast<void *>(Work));
  };
  if (int S = Issue())
    return err("'%" + M.getName() + "': " + M.getDecision() +
               " failed with status " + std::to_string(S));
  if (CUresult R = syncStream(D, Gp.Stream,
                              M.getDecision() + " for '%" + M.getName() + "'"))
    return err("'%" + M.getName() + "': " + M.getDecision() +
               " failed: " + D.errorString(R));
  Replay.push_back([Issue] { return CUresult(Issue() ? 1 : 0); });
  ++Launched;
  return llvm::Error::success();
}
