//===- CudaBenchmarker.cpp - Timing choices on a CUDA GPU -----------------===//
//
// The cuda backend's builder generates the kept choices' kernels of a
// batch of nodes and compiles them at once on the compile thread pool; its
// runner, for each multi-template buffer (at its size or a size hint),
// first prepares everything the node's choices need: seeded random inputs
// (rotated copies so that back-to-back launches do not hit a warm L2), the
// fp64 reference of a sample of output rows, and the built kernels, loaded
// (compiled now if they were not built). Each measurement then checks the
// choice's output against the reference and times it: warm-up, then BenchRuns
// samples, each many back-to-back launches between two events divided by their
// count, the L2 flushed before each sample; the median counts.
//
//===----------------------------------------------------------------------===//
#include "mtsched/Backend/Cuda/CudaBenchmarker.h"
#include "CublasGemm.h"
#include "CudaBenchmarkerImpl.h"
#include "mtsched/Backend/Cuda/AttentionCodegen.h"
#include "mtsched/Backend/Cuda/CollectiveCodegen.h"
#include "mtsched/Backend/Cuda/CudaApi.h"
#include "mtsched/Backend/Cuda/CudaBenchSupport.h"
#include "mtsched/Backend/Cuda/CudaCodegen.h"
#include "mtsched/Backend/Cuda/CudaCompiler.h"
#include "mtsched/Backend/Cuda/NcclApi.h"
#include "mtsched/Backend/Cuda/OpUnitKernels.h"
#include "mtsched/Backend/Cuda/PeerAccess.h"
#include "mtsched/IR/OpUnit.h"
#include "mtsched/Reference/Interpreter.h"
#include "mtsched/Reference/Npy.h"
#include "mtsched/Reference/RandomInputs.h"
#include "mtsched/Schedule/Schedule.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/TimeProfiler.h"
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <random>

using namespace mtsched;
using namespace mtsched::cuda;

static llvm::Error err(const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Msg);
}

std::string CudaSession::openGpu() {
  if (G)
    return std::string();
  llvm::Expected<Gpu &> GOr = gpu(Opts.GpuOrdinal);
  if (!GOr)
    return "the cuda backend cannot run here: " +
           llvm::toString(GOr.takeError());
  G = &*GOr;
  return std::string();
}

CudaSession::~CudaSession() {
  if (!G)
    return;
  std::lock_guard<std::mutex> Lock(G->Mu);
  if (makeCurrent(G->Info))
    return;
  for (auto &KV : Cache) {
    Prepared &P = *KV.second;
    for (auto *Bufs : {&P.Dev, &P.Scratch})
      for (auto &D : *Bufs)
        for (DevBuf &B : D.second)
          G->D->cuMemFree(B.P);
    for (int I = 0; I < 8; ++I)
      for (DevBuf *B : {&P.OutMain[I], &P.OutFused[I], &P.OutEpi[I]})
        if (B->P)
          G->D->cuMemFree(B->P);
    if (P.Workspace.P)
      G->D->cuMemFree(P.Workspace.P);
    for (auto &K : P.Kernels)
      if (K.second.Mod)
        G->D->cuModuleUnload(K.second.Mod);
  }
}

CUresult CudaSession::launch(LoadedKernel &L, Prepared &P, const DevBuf *Out,
                             int Copy) {
  std::vector<CUdeviceptr> Ptrs;
  for (const Value *V : L.K.Inputs)
    Ptrs.push_back(P.Dev[V][Copy].P);
  // The measured output is the kernel's last; any before it (an epilogue's
  // `writes`) go to scratch buffers of their own.
  for (size_t I = 0; I + 1 < L.K.Outputs.size(); ++I) {
    const Value *V = L.K.Outputs[I];
    std::vector<DevBuf> &Bufs = P.Scratch[V];
    if (Bufs.empty()) {
      Bufs.resize(P.Copies);
      for (DevBuf &B : Bufs) {
        B.Bytes =
            P.Rows * V->getType().innerDim() * dtypeBytes(V->getType().Dtype);
        if (CUresult R =
                G->D->cuMemAlloc(&B.P, std::max<size_t>(16, B.Bytes))) {
          for (DevBuf &F : Bufs)
            if (F.P)
              G->D->cuMemFree(F.P);
          P.Scratch.erase(V);
          return R;
        }
      }
    }
    Ptrs.push_back(Bufs[Copy].P);
  }
  Ptrs.push_back(Out[Copy].P);
  if (L.K.WorkspaceBytes) {
    // measure() allocated and zeroed it; 1 is CUDA_ERROR_INVALID_VALUE.
    if (P.Workspace.Bytes < L.K.WorkspaceBytes)
      return 1;
    Ptrs.push_back(P.Workspace.P);
  }
  std::vector<void *> Args;
  if (!L.K.TensorMaps.empty()) {
    // Encoded once per set of buffers: an output's map (a TMA store) must
    // follow the buffer this launch writes.
    auto &[Over, Maps] = L.Maps[Copy];
    size_t Params = L.K.Inputs.size() + L.K.Outputs.size();
    std::vector<CUdeviceptr> These(Ptrs.begin(), Ptrs.begin() + Params);
    if (Maps.empty() || Over != These) {
      if (CUresult R = encodeTensorMaps(*G->D, L.K, These, Maps)) {
        L.Maps.erase(Copy);
        return R;
      }
      Over = std::move(These);
    }
    for (CUtensorMap &Map : Maps)
      Args.push_back(&Map);
  }
  for (CUdeviceptr &X : Ptrs)
    Args.push_back(&X);
  return launchKernel(*G->D, L.Fn, L.K, G->Info.SMs, G->Stream, Args.data());
}

Measurement CudaSession::run(
    const std::function<CUresult(int)> &Launch, Prepared &P, const DevBuf *Out,
    DType OutType, const std::vector<std::vector<double>> &Ref, double *Best,
    const KernelSource *K,
    const std::map<const Value *, std::vector<std::vector<double>>> *Extra) {
  const std::string Running =
      K ? "kernel '" + K->Name + "'" : std::string("the measured library call");
  // The kernel's other outputs (an epilogue's `writes`), each with its
  // buffer of copy 0 and its reference rows.
  std::vector<CheckedOutput> Others;
  if (K && Extra)
    for (size_t I = 0; I + 1 < K->Outputs.size(); ++I) {
      const Value *V = K->Outputs[I];
      auto B = P.Scratch.find(V);
      auto R = Extra->find(V);
      if (B == P.Scratch.end() || B->second.empty() || R == Extra->end())
        return failed(ChoiceStatus::Failed,
                      "no reference for the output '%" + V->getName() + "'");
      Others.push_back({V, &B->second[0], &R->second});
    }
  if (std::optional<Measurement> Wrong =
          checkRun(Launch, P, Out, OutType, Ref, Others, Running))
    return *Wrong;
  // Nothing may set a GPU up while a choice is timed (docs/CUDA.md).
  waitForCollectiveSetUp();
  return timeRun(Launch, P, Best, Running);
}

/// What run() says of a failed driver call.
static Measurement failedCall(const DriverApi &D, const char *What,
                              CUresult R) {
  return failed(ChoiceStatus::Failed,
                std::string(What) + ": " + D.errorString(R));
}

std::optional<Measurement> CudaSession::checkRun(
    const std::function<CUresult(int)> &Launch, Prepared &P, const DevBuf *Out,
    DType OutType, const std::vector<std::vector<double>> &Ref,
    llvm::ArrayRef<CheckedOutput> Others, const std::string &Running) {
  const DriverApi &D = *G->D;
  auto Fail = [&](const char *What, CUresult R) {
    return failedCall(D, What, R);
  };
  // Correctness: poison the outputs, run once, compare sampled rows.
  llvm::TimeTraceScope Phase("cuda.check");
  if (CUresult R = D.cuMemsetD8Async(Out[0].P, 0xff, Out[0].Bytes, G->Stream))
    return Fail("cannot poison the output", R);
  for (const auto &[V, B, Rows] : Others)
    if (CUresult R = D.cuMemsetD8Async(B->P, 0xff, B->Bytes, G->Stream))
      return Fail("cannot poison an output", R);
  if (CUresult R = Launch(0))
    return Fail("launch failed", R);
  if (CUresult R = syncStream(D, G->Stream, Running))
    return Fail("kernel failed", R);
  // Only the checked rows come back: the whole of a 4096x4096 output took
  // a tenth of a second to copy and convert, for 16 rows. An epilogue
  // through a transpose scattered each row (P.OutMaps): the whole output
  // comes back, and each row's elements are gathered from where they went.
  bool Mapped = !P.OutMaps.empty() && &Ref != &P.RefMain;
  auto ReadRows = [&](const DevBuf &B, size_t ElemBytes, size_t RowLen,
                      std::string &To) -> CUresult {
    size_t RowBytes = RowLen * ElemBytes;
    To.assign(P.CheckRows.size() * RowBytes, '\0');
    if (!Mapped) {
      for (size_t I = 0; I < P.CheckRows.size(); ++I)
        if (CUresult R = D.cuMemcpyDtoH(
                &To[I * RowBytes], B.P + CUdeviceptr(P.CheckRows[I]) * RowBytes,
                RowBytes))
          return R;
      return CUDA_SUCCESS;
    }
    std::string All(size_t(P.Rows) * RowBytes, '\0');
    if (All.size() > B.Bytes)
      return 1; // CUDA_ERROR_INVALID_VALUE: the output is smaller than its rows
    if (CUresult R = D.cuMemcpyDtoH(All.data(), B.P, All.size()))
      return R;
    for (size_t I = 0; I < P.CheckRows.size(); ++I)
      for (size_t C = 0; C < RowLen; ++C) {
        int64_t At = P.CheckRows[I] * int64_t(RowLen) + int64_t(C);
        for (const ElementMap &M : P.OutMaps)
          At = M.apply(At);
        std::memcpy(&To[I * RowBytes + C * ElemBytes],
                    &All[size_t(At) * ElemBytes], ElemBytes);
      }
    return CUDA_SUCCESS;
  };
  std::string Bytes;
  if (CUresult R = ReadRows(Out[0], dtypeBytes(OutType), size_t(P.N), Bytes))
    return Fail("cannot read the output", R);
  std::vector<int64_t> Packed;
  for (size_t I = 0; I < P.CheckRows.size(); ++I)
    Packed.push_back(int64_t(I));
  double Rel = relError(toHostValues(Bytes, OutType), P.N, Packed, Ref);
  if (!(Rel <= tolerance(OutType)))
    return failed(ChoiceStatus::WrongResult,
                  "output differs from the fp64 reference: relative error " +
                      llvm::formatv("{0:e2}", Rel).str() + " > " +
                      llvm::formatv("{0:e0}", tolerance(OutType)).str());
  for (const auto &[V, B, Rows] : Others) {
    DType T = V->getType().Dtype;
    // Mapped, a write comes after the layout ops: rows of the template's.
    int64_t RowLen = Mapped ? P.N : V->getType().innerDim();
    std::string Other;
    if (CUresult R = ReadRows(*B, dtypeBytes(T), size_t(RowLen), Other))
      return Fail("cannot read an output", R);
    double RelW = relError(toHostValues(Other, T), RowLen, Packed, *Rows);
    if (!(RelW <= tolerance(T)))
      return failed(ChoiceStatus::WrongResult,
                    "output '%" + V->getName() +
                        "' differs from the fp64 reference: relative error " +
                        llvm::formatv("{0:e2}", RelW).str() + " > " +
                        llvm::formatv("{0:e0}", tolerance(T)).str());
  }
  return std::nullopt;
}

Measurement CudaSession::timeRun(const std::function<CUresult(int)> &Launch,
                                 Prepared &P, double *Best,
                                 const std::string &Running) {
  const DriverApi &D = *G->D;
  auto Fail = [&](const char *What, CUresult R) {
    return failedCall(D, What, R);
  };
  // Warm-up, then an estimate that sizes the samples.
  llvm::TimeTraceScope Phase("cuda.time");
  for (unsigned I = 0; I < std::max(1u, Opts.WarmupRuns); ++I)
    if (CUresult R = Launch(int(I % P.Copies)))
      return Fail("launch failed", R);
  D.cuEventRecord(G->E0, G->Stream);
  if (CUresult R = Launch(0))
    return Fail("launch failed", R);
  D.cuEventRecord(G->E1, G->Stream);
  if (CUresult R = syncEvent(D, G->E1, Running))
    return Fail("kernel failed", R);
  float Ms = 0;
  D.cuEventElapsedTime(&Ms, G->E0, G->E1);
  double EstUs = std::max(1.0, double(Ms) * 1000);
  int PerSample = int(std::min(1000.0, std::max(2.0, std::ceil(500 / EstUs))));
  double Budget = EstUs * PerSample * Opts.BenchRuns / 1000;
  if (Budget > double(Opts.ChoiceTimeout.count()))
    return failed(
        ChoiceStatus::Timeout,
        "would run " + std::to_string(int(Budget)) + " ms, past the " +
            std::to_string(Opts.ChoiceTimeout.count()) + " ms choice timeout");
  // Each sample replays the PerSample launches captured in a CUDA graph:
  // device time without the host's dispatch gaps between launches (about a
  // microsecond each, which made a 16 us decode GEMM look 7% slower than
  // the same cuBLAS kernel timed by the PyTorch peers, which replay graphs).
  // Where capture fails, the launches run eagerly and the measurement says
  // so.
  CUgraph Graph = nullptr;
  CUgraphExec Exec = nullptr;
  if (D.cuStreamBeginCapture && D.cuStreamEndCapture &&
      D.cuGraphInstantiateWithFlags && D.cuGraphLaunch &&
      !D.cuStreamBeginCapture(G->Stream, CU_STREAM_CAPTURE_MODE_RELAXED)) {
    bool LaunchesOk = true;
    for (int I = 0; I < PerSample; ++I)
      LaunchesOk &= !Launch(I % P.Copies);
    bool Ended = !D.cuStreamEndCapture(G->Stream, &Graph);
    if (!LaunchesOk || !Ended || !Graph ||
        D.cuGraphInstantiateWithFlags(&Exec, Graph, 0))
      Exec = nullptr;
  }
  auto Cleanup = llvm::make_scope_exit([&] {
    if (Exec)
      D.cuGraphExecDestroy(Exec);
    if (Graph)
      D.cuGraphDestroy(Graph);
  });
  std::vector<double> Samples;
  for (unsigned S = 0; S < std::max(1u, Opts.BenchRuns); ++S) {
    if (G->Flush)
      D.cuMemsetD8Async(G->Flush, S & 0xff, G->FlushBytes, G->Stream);
    D.cuEventRecord(G->E0, G->Stream);
    if (Exec) {
      if (CUresult R = D.cuGraphLaunch(Exec, G->Stream))
        return Fail("graph launch failed", R);
    } else {
      for (int I = 0; I < PerSample; ++I)
        if (CUresult R = Launch(int((S * PerSample + I) % P.Copies)))
          return Fail("launch failed", R);
    }
    D.cuEventRecord(G->E1, G->Stream);
    if (CUresult R = syncEvent(D, G->E1, Running))
      return Fail("kernel failed", R);
    D.cuEventElapsedTime(&Ms, G->E0, G->E1);
    Samples.push_back(double(Ms) * 1000 / PerSample);
    // Triton's and Inductor's habit: a choice whose first samples are all
    // far slower than the best so far cannot win; its median so far says
    // so without the remaining samples.
    if (Best && Samples.size() == EarlyStopSamples &&
        Samples.size() < Opts.BenchRuns &&
        *llvm::min_element(Samples) > EarlyStopFactor * *Best)
      break;
  }
  std::nth_element(Samples.begin(), Samples.begin() + Samples.size() / 2,
                   Samples.end());
  Measurement M;
  M.Us = Samples[Samples.size() / 2];
  if (!Exec)
    M.Message = "timed without a CUDA graph (capture failed): host dispatch "
                "gaps included";
  if (Best)
    *Best = std::min(*Best, M.Us);
  return M;
}

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
    if (Fused)
      return failed(ChoiceStatus::Failed, "'" + C.Name + "' cannot fuse");
    if (C.Name != "extern.cublas")
      return failed(ChoiceStatus::Failed, "unknown extern choice");
    if (!G->blas())
      return failed(ChoiceStatus::Failed, G->BlasError);
    llvm::Expected<CublasGemmShape> Shape = cublasGemmShapeOf(N);
    if (!Shape)
      return failed(ChoiceStatus::Failed, llvm::toString(Shape.takeError()));
    const Value *A = N.getOperand(0), *B = N.getOperand(1);
    return run(
        [&](int Copy) -> CUresult {
          int S = cublasGemm(*G->B, G->Blas, *Shape,
                             reinterpret_cast<void *>(P.Dev[A][Copy].P),
                             reinterpret_cast<void *>(P.Dev[B][Copy].P),
                             reinterpret_cast<void *>(P.OutMain[Copy].P));
          return S ? 999 : CUDA_SUCCESS;
        },
        P, P.OutMain, OutType, Ref, &P.BestUs[0]);
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

namespace {

class CudaBuilder : public Builder {
public:
  explicit CudaBuilder(std::shared_ptr<CudaSession> S) : S(std::move(S)) {}
  std::vector<BuiltChoices> build(llvm::ArrayRef<BuildInput> Batch) override {
    return S->build(Batch);
  }
  std::vector<std::pair<std::string, int64_t>> getCounters() const override {
    return S->getCounters();
  }

private:
  std::shared_ptr<CudaSession> S;
};

class CudaRunner : public Runner {
public:
  explicit CudaRunner(std::shared_ptr<CudaSession> S) : S(std::move(S)) {}
  /// The session finds the kernels Built stands for in its node's state
  /// (compiling them now if they were not built).
  Measurement measure(const MultiTemplateBufferNode &N, const Workload &W,
                      const Choice &C, bool Fused,
                      const BuildResult &) override {
    return S->measure(N, W, C, Fused);
  }
  Measurement measureEpilogue(const MultiTemplateBufferNode &N,
                              const Workload &W) override {
    return S->measureEpilogue(N, W);
  }

private:
  std::shared_ptr<CudaSession> S;
};

} // namespace

llvm::Expected<std::unique_ptr<Benchmarker>>
mtsched::createCudaBenchmarker(const AutotuneOptions &Opts, int Rank,
                               Communicator &Comm) {
  // Only the driver library is checked here (no CUDA context, no cuInit):
  // the GPU opens at the first measurement, so a fully cached run starts
  // in milliseconds. A machine with the driver but no usable GPU fails
  // every measurement with the reason instead.
  if (llvm::Expected<const DriverApi &> D = loadDriver(); !D)
    return err("the cuda backend cannot run here: " +
               llvm::toString(D.takeError()));
  auto S = std::make_shared<CudaSession>(Opts, Rank, Comm);
  return std::make_unique<Benchmarker>(
      "cuda", Benchmarker::getDefaultVersion().str(),
      std::make_unique<CudaBuilder>(S), std::make_unique<CudaRunner>(S));
}

llvm::Error mtsched::openCudaDevice(const AutotuneOptions &Opts) {
  llvm::Expected<Gpu &> G = gpu(Opts.GpuOrdinal);
  if (!G)
    return err("the cuda backend cannot run here: " +
               llvm::toString(G.takeError()));
  return llvm::Error::success();
}

BackendInfo mtsched::getCudaBackend() {
  BackendInfo B;
  B.Name = "cuda";
  B.Description = "NVRTC-compiled kernels timed with CUDA events on a GPU";
  // As createCudaBenchmarker names it.
  B.Version = Benchmarker::getDefaultVersion().str();
  B.Create = createCudaBenchmarker;
  B.Probe = [](const AutotuneOptions &Opts) -> llvm::Error {
    // The driver library first (cheap), then the device itself.
    if (llvm::Expected<const DriverApi &> D = loadDriver(); !D)
      return err("the cuda backend cannot run here: " +
                 llvm::toString(D.takeError()));
    return openCudaDevice(Opts);
  };
  B.TriedByAuto = true;
  B.RunGraph = [](const Graph &G, const RunIO &IO, llvm::raw_ostream &OS) {
    return runGraphOnGpu(G, IO, OS);
  };
  B.CountDevices = [] { return countDevices(); };
  B.PeerOrdinals = [](int Ordinal) { return peerOrdinals(Ordinal); };
  B.PrepareGraph = [](const Module &, const Graph &G, const RunIO &IO) {
    return prepareGraphOnGpu(G, IO);
  };
  B.MakeCommId = []() -> llvm::Expected<std::string> {
    llvm::Expected<const nccl::NcclApi &> N = nccl::loadNccl();
    if (!N)
      return N.takeError();
    nccl::ncclUniqueId Id;
    if (nccl::ncclResult_t R = N->ncclGetUniqueId(&Id))
      return err("ncclGetUniqueId: " + N->errorString(R));
    return std::string(Id.Internal, sizeof(Id.Internal));
  };
  B.DumpKernels =
      [](const Module &M, const Graph &G, llvm::StringRef Dir,
         std::vector<std::string> &Missing) -> llvm::Expected<unsigned> {
    std::vector<KernelSource> Ks = generateGraphKernels(G, Missing);
    // The peer-memory collectives the decided graph runs are kernels too;
    // NCCL choices are library calls and have none.
    for (KernelSource &K : generateGraphCollectiveKernels(M, G, Missing))
      Ks.push_back(std::move(K));
    if (llvm::Error E = dumpKernels(Ks, Dir))
      return std::move(E);
    return unsigned(Ks.size());
  };
  return B;
}
