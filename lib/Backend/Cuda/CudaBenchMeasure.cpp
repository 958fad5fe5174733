//===- CudaBenchMeasure.cpp - What one measurement of a choice runs -------===//
//
// CudaSession's measurements: a generated kernel (compiled now if the
// builder left it out), cuBLAS or an op unit's library call, a one-rank
// collective as a device-to-device copy, or a node's epilogue alone; each
// handed to run() (CudaBenchRun.cpp), which checks and times it.
// Collectives over several ranks go to CollectiveRank (CudaCollective.cpp).
//
//===----------------------------------------------------------------------===//
#include "CudaBenchmarkerImpl.h"
#include "mtsched/Backend/Cuda/CudaApi.h"
#include "mtsched/Backend/Cuda/CudaCodegen.h"
#include "mtsched/Backend/Cuda/CudaCompiler.h"
#include "mtsched/Backend/Cuda/OpUnitKernels.h"
#include "mtsched/IR/OpUnit.h"
#include <algorithm>
#include <mutex>

using namespace mtsched;
using namespace mtsched::cuda;

Measurement CudaSession::measureOneRankCopy(const MultiTemplateBufferNode &N,
                                            const Workload &W,
                                            const Choice &C) {
  // One rank: the collective is a device-to-device copy.
  Prepared &P = prepare(N, W);
  if (!P.Error.empty())
    return failed(ChoiceStatus::Failed, P.Error);
  const Value *In = N.getOperand(0);
  // An uneven all_to_all keeps min(rows, capacity) rows (raggedCounts at
  // one rank) and zeros the rest; only nccl moves counted rows.
  size_t CopyBytes = P.OutMain[0].Bytes;
  int64_t CopyElems = N.getType().numElements();
  if (W.Ragged) {
    if (collectiveAlgoOf(C) != CollectiveAlgo::Nccl)
      return failed(ChoiceStatus::Failed,
                    "'" + C.Name +
                        "' splits evenly; an uneven all_to_all runs on "
                        "nccl only");
    CopyElems = std::min(In->getType().numElements(), CopyElems);
    CopyBytes = size_t(CopyElems) * dtypeBytes(N.getType().Dtype);
  }
  return run(
      [&](int Copy) {
        CUresult R = G->D->cuMemcpyDtoDAsync(
            P.OutMain[Copy].P, P.Dev[In][Copy].P, CopyBytes, G->Stream);
        if (!R && CopyBytes < P.OutMain[Copy].Bytes)
          R = G->D->cuMemsetD8Async(P.OutMain[Copy].P + CopyBytes, 0,
                                    P.OutMain[Copy].Bytes - CopyBytes,
                                    G->Stream);
        return R;
      },
      P, P.OutMain, N.getType().Dtype,
      [&] {
        std::vector<std::vector<double>> Ref;
        for (int64_t R : P.CheckRows) {
          std::vector<double> Row(size_t(P.N), 0.0);
          for (int64_t I = 0; I < P.N; ++I)
            if (R * P.N + I < CopyElems)
              Row[size_t(I)] = P.Host.at(In, R * P.N + I);
          Ref.push_back(std::move(Row));
        }
        return Ref;
      }());
}

Measurement CudaSession::measure(const MultiTemplateBufferNode &N,
                                 const Workload &W, const Choice &C,
                                 bool Fused) {
  if (W.K == Workload::Kind::Collective && W.Ranks > 1) {
    // Every rank must take part, even one that refuses (an injected fault):
    // the peers then fail the choice too instead of waiting for it.
    if (Comm && Comm->size() > W.Ranks)
      return failed(ChoiceStatus::Failed,
                    "the cuda backend times collectives over every rank "
                    "only; a " +
                        std::to_string(W.Ranks) + "-rank process group of " +
                        std::to_string(Comm->size()) +
                        " ranks is not implemented yet");
    if (!Comm || Comm->size() != W.Ranks)
      return failed(ChoiceStatus::Failed,
                    "a " + std::to_string(W.Ranks) +
                        "-rank collective needs that many ranks, one GPU "
                        "each (run with --ranks=" +
                        std::to_string(W.Ranks) + ")");
    std::string Fault;
    if (Opts.Faults.choiceFault(Rank, N.getName(), C.Name))
      Fault = "injected fault";
    if (!Coll)
      Coll = createCollectiveRank(Opts, *Comm, Stats);
    return Coll->measure(N, W, C, Fused, Fault);
  }
  if (const Fault *F = Opts.Faults.choiceFault(Rank, N.getName(), C.Name))
    return failed(F->K == Fault::Kind::WrongResult ? ChoiceStatus::WrongResult
                                                   : ChoiceStatus::Failed,
                  "injected fault");
  if (W.K == Workload::Kind::Collective) {
    if (W.Ranks > 1)
      return failed(ChoiceStatus::Failed,
                    "the cuda backend needs one rank per GPU for a " +
                        std::to_string(W.Ranks) +
                        "-rank collective (not implemented yet)");
    if (Fused)
      return failed(ChoiceStatus::Failed,
                    "a one-rank collective is a copy; its epilogue is "
                    "measured as its own kernel");
  }
  if (W.K == Workload::Kind::Custom)
    return failed(ChoiceStatus::Failed,
                  "the cuda backend has no kernel for custom op '" +
                      N.getOpName().str() + "'");
  compileAhead(N, W, [](size_t) { return true; });
  if (std::string Why = openGpu(); !Why.empty())
    return failed(ChoiceStatus::Failed, Why);
  std::lock_guard<std::mutex> Lock(G->Mu);
  if (llvm::Error E = makeCurrent(G->Info))
    return failed(ChoiceStatus::Failed, llvm::toString(std::move(E)));
  if (W.K == Workload::Kind::Collective)
    return measureOneRankCopy(N, W, C);
  Prepared &P = prepare(N, W);
  if (!P.Error.empty())
    return failed(ChoiceStatus::Failed, P.Error);
  DType OutType =
      Fused ? N.getEpilogue().back().V->getType().Dtype : N.getType().Dtype;
  const DevBuf *Out = Fused ? P.OutFused : P.OutMain;
  const auto &Ref = Fused ? P.RefFused : P.RefMain;
  if (C.isExtern() && hasOpUnitChoices(N.getOp())) {
    if (Fused)
      return failed(ChoiceStatus::Failed, "'" + C.Name + "' cannot fuse");
    return measureOpUnitExtern(N, C, P);
  }
  if (C.isExtern()) {
    std::string Why;
    std::function<CUresult(int)> Launch =
        blasLaunch(*G, P, N, C.Name, Fused, Why);
    if (!Launch)
      return failed(ChoiceStatus::Failed, Why);
    return run(Launch, P, Out, OutType, Ref, &P.BestUs[Fused]);
  }
  auto It = P.Kernels.find(keyOf(C.Name, Fused));
  if (It == P.Kernels.end() &&
      (N.getOp() == OpCode::MatMul || N.getOp() == OpCode::SwiGlu ||
       N.getOp() == OpCode::Attention || hasOpUnitChoices(N.getOp()))) {
    // A choice the builder left out (pruned): compile it now.
    compileChoices(N, P,
                   [&](size_t I) { return N.getChoices()[I].Name == C.Name; });
    It = P.Kernels.find(keyOf(C.Name, Fused));
  }
  if (It == P.Kernels.end())
    return failed(ChoiceStatus::Failed,
                  "no kernel for '" + C.Name + "' on the cuda backend");
  LoadedKernel &L = It->second;
  if (!L.Error.empty())
    return failed(ChoiceStatus::Failed, L.Error);
  if (L.K.WorkspaceBytes) {
    // Zero-filled before every choice: a split-KV kernel's tile counters
    // must start at zero, whatever ran in the workspace before.
    if (P.Workspace.Bytes < L.K.WorkspaceBytes) {
      if (P.Workspace.P)
        G->D->cuMemFree(P.Workspace.P);
      P.Workspace = DevBuf();
      if (CUresult R = G->D->cuMemAlloc(&P.Workspace.P, L.K.WorkspaceBytes))
        return failed(ChoiceStatus::Failed,
                      "cannot allocate a workspace of " +
                          std::to_string(L.K.WorkspaceBytes) +
                          " bytes: " + G->D->errorString(R));
      P.Workspace.Bytes = L.K.WorkspaceBytes;
    }
    if (CUresult R = G->D->cuMemsetD8Async(P.Workspace.P, 0, P.Workspace.Bytes,
                                           G->Stream))
      return failed(ChoiceStatus::Failed,
                    "cannot clear the workspace: " + G->D->errorString(R));
  }
  return run([&](int Copy) { return launch(L, P, Out, Copy); }, P, Out, OutType,
             Ref, &P.BestUs[Fused], &L.K, &P.RefWritesFused);
}

Measurement CudaSession::measureOpUnitExtern(const MultiTemplateBufferNode &N,
                                             const Choice &C, Prepared &P) {
  // The op unit's library (extern.cudnn): where it cannot be loaded the
  // choice fails with the reason, and the others are decided among.
  llvm::Expected<OpUnitExternCall> Call = prepareOpUnitExtern(N, C.Name);
  if (!Call)
    return failed(ChoiceStatus::Failed, llvm::toString(Call.takeError()));
  llvm::Expected<size_t> Bytes = Call->Plan(G->Stream);
  if (!Bytes)
    return failed(ChoiceStatus::Failed, llvm::toString(Bytes.takeError()));
  if (*Bytes && P.Workspace.Bytes < *Bytes) {
    if (P.Workspace.P)
      G->D->cuMemFree(P.Workspace.P);
    P.Workspace = DevBuf();
    if (CUresult R = G->D->cuMemAlloc(&P.Workspace.P, *Bytes))
      return failed(ChoiceStatus::Failed,
                    "cannot allocate a workspace of " + std::to_string(*Bytes) +
                        " bytes: " + G->D->errorString(R));
    P.Workspace.Bytes = *Bytes;
  }
  // A library status is not a CUresult: the first one is reported itself.
  int LibStatus = 0;
  Measurement M = run(
      [&](int Copy) -> CUresult {
        std::vector<void *> Ptrs;
        for (const Operand &O : N.getOperands())
          Ptrs.push_back(reinterpret_cast<void *>(P.Dev[O.V][Copy].P));
        int S = Call->Run(G->Stream, Ptrs,
                          reinterpret_cast<void *>(P.OutMain[Copy].P),
                          reinterpret_cast<void *>(P.Workspace.P));
        if (S && !LibStatus)
          LibStatus = S;
        return S ? CUresult(999) : CUDA_SUCCESS;
      },
      P, P.OutMain, N.getType().Dtype, P.RefMain, &P.BestUs[0]);
  if (LibStatus)
    M.Message = C.Name + " failed with the library's status " +
                std::to_string(LibStatus) + " (" + M.Message + ")";
  return M;
}

Measurement CudaSession::measureEpilogue(const MultiTemplateBufferNode &N,
                                         const Workload &W) {
  if (N.getEpilogue().empty())
    return Measurement();
  compileAhead(N, W, [](size_t) { return true; });
  if (std::string Why = openGpu(); !Why.empty())
    return failed(ChoiceStatus::Failed, Why);
  std::lock_guard<std::mutex> Lock(G->Mu);
  if (llvm::Error E = makeCurrent(G->Info))
    return failed(ChoiceStatus::Failed, llvm::toString(std::move(E)));
  Prepared &P = prepare(N, W);
  if (!P.Error.empty())
    return failed(ChoiceStatus::Failed, P.Error);
  auto It = P.Kernels.find("epilogue");
  if (It == P.Kernels.end()) {
    // Not a matmul: compile the epilogue alone.
    LoadedKernel &L = P.Kernels["epilogue"];
    llvm::Expected<KernelSource> K = generateEpilogueKernel(N, P.Rows);
    if (!K) {
      L.Error = llvm::toString(K.takeError());
    } else {
      L.K = std::move(*K);
      auto C = compileAll({{L.K.Name, L.K.Source}},
                          G->Info.Major * 10 + G->Info.Minor,
                          compileOptionsOf(Opts), &Stats);
      if (!C[0])
        L.Error = llvm::toString(C[0].takeError());
      else if (G->D->cuModuleLoadData(&L.Mod, C[0]->data()) ||
               G->D->cuModuleGetFunction(&L.Fn, L.Mod, L.K.Name.c_str()))
        L.Error = "cannot load the epilogue kernel";
    }
    It = P.Kernels.find("epilogue");
  }
  LoadedKernel &L = It->second;
  if (!L.Error.empty())
    return failed(ChoiceStatus::Failed, L.Error);
  return run([&](int Copy) { return launch(L, P, P.OutEpi, Copy); }, P,
             P.OutEpi, N.getEpilogue().back().V->getType().Dtype, P.RefEpi,
             nullptr, &L.K, &P.RefWritesEpi);
}
