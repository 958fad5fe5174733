//===- CudaBenchRun.cpp - Checking and timing one choice on the GPU -------===//
//
// CudaSession::run(): a choice's launch is first checked (outputs
// poisoned, one launch, the sampled rows compared with the fp64
// reference), then timed: warm-up, an estimate that sizes the samples, and
// BenchRuns samples replayed from a CUDA graph, the L2 flushed before each;
// the median counts. launch() binds a kernel's buffers and tensor maps.
//
//===----------------------------------------------------------------------===//
#include "CudaBenchmarkerImpl.h"
#include "mtsched/Backend/Cuda/CudaApi.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/TimeProfiler.h"
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>

using namespace mtsched;
using namespace mtsched::cuda;

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
  return launchKernel(*G->D, L.Fn, L.K, G->Info, G->Stream, Args.data());
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
  int PerSample =
      int(std::min(1000.0, std::max(2.0, std::ceil(Opts.SampleUs / EstUs))));
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
