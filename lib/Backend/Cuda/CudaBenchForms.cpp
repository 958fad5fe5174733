//===- CudaBenchForms.cpp - Forms timed interleaved at sustained load -----===//
//
// CudaSession::measureForms(): whole forms of a computation (a SwiGLU as
// one merged GEMM, or as two GEMMs and an epilogue kernel) timed against
// each other the way a prefill layer runs them. The autotuner's samples are
// 0.5 ms bursts after an idle GPU: a kernel of 1.2 ms gets more of the
// boost clock than one of 2.7 ms, and at Llama-3-70B's prefill the split
// SwiGLU won those bursts but lost in the running layer. Here each form
// runs WarmUs back to back, then a sample of SampleUs, in rounds that
// alternate the forms, with no L2 flush and no idle gap inside a sample:
// every form is timed at the clock its own sustained load settles to.
//
//===----------------------------------------------------------------------===//
#include "CudaBenchmarkerImpl.h"
#include "mtsched/Backend/Cuda/CudaApi.h"
#include "llvm/Support/TimeProfiler.h"
#include <algorithm>
#include <cmath>
#include <functional>

using namespace mtsched;
using namespace mtsched::cuda;

namespace {
/// One kernel of a form, ready to launch on a rotated copy of its inputs.
using KernelLaunch = std::function<CUresult(int)>;
} // namespace

/// The launch of K, whose node was measured (prepared, its kernels
/// loaded); null with Why set where there is none.
static KernelLaunch
formLaunch(Gpu &G, Prepared &P, const FormKernel &K, std::string &Why,
           const std::function<CUresult(LoadedKernel &, Prepared &,
                                        const DevBuf *, int)> &Launch) {
  const MultiTemplateBufferNode &N = *K.N;
  int Copies = std::max(1, P.Copies);
  if (K.C && K.C->isExtern()) {
    if (!isBlasChoice(K.C->Name)) {
      Why = "'" + K.C->Name + "' is not timed in a form";
      return nullptr;
    }
    // cuBLASLt's fused variant writes P.OutFused, as a fused kernel does.
    return blasLaunch(G, P, N, K.C->Name, K.Fused, Why);
  }
  std::string Key = K.C ? keyOf(K.C->Name, K.Fused) : "epilogue";
  auto It = P.Kernels.find(Key);
  if (It == P.Kernels.end() || !It->second.Error.empty() || !It->second.Fn) {
    Why = "no loaded kernel '" + Key + "' for '%" + N.getName() + "'";
    return nullptr;
  }
  LoadedKernel &L = It->second;
  if (L.K.WorkspaceBytes > P.Workspace.Bytes) {
    Why = "'" + Key + "' needs a workspace its node did not keep";
    return nullptr;
  }
  const DevBuf *Out = !K.C ? P.OutEpi : K.Fused ? P.OutFused : P.OutMain;
  return [&L, &P, Out, Copies, Launch](int Copy) {
    return Launch(L, P, Out, Copy % Copies);
  };
}

std::vector<Measurement>
CudaSession::measureForms(llvm::ArrayRef<std::vector<FormKernel>> Forms,
                          const SustainedProtocol &Pr) {
  std::vector<Measurement> Out(Forms.size());
  auto FailAll = [&](const std::string &Why) {
    for (Measurement &M : Out)
      M = failed(ChoiceStatus::Failed, Why);
    return Out;
  };
  // Each kernel measured as the autotuner does first: prepared, compiled
  // and checked against fp64 in this process (select-swiglu may run on a
  // decided file, in a process that timed nothing).
  for (size_t F = 0; F < Forms.size(); ++F)
    for (const FormKernel &K : Forms[F]) {
      if (K.W.K == Workload::Kind::Collective ||
          K.W.K == Workload::Kind::Custom)
        return FailAll("'%" + K.N->getName() + "' is not timed in a form");
      Measurement M =
          K.C ? measure(*K.N, K.W, *K.C, K.Fused) : measureEpilogue(*K.N, K.W);
      if (M.Status != ChoiceStatus::Ok)
        Out[F] = failed(M.Status, "'%" + K.N->getName() + "': " + M.Message);
    }
  if (llvm::any_of(Out, [](const Measurement &M) {
        return M.Status != ChoiceStatus::Ok;
      }))
    return Out;
  if (!G)
    return FailAll("no GPU is open");
  std::lock_guard<std::mutex> Lock(G->Mu);
  if (llvm::Error E = makeCurrent(G->Info))
    return FailAll(llvm::toString(std::move(E)));
  auto LaunchKernel = [this](LoadedKernel &L, Prepared &P, const DevBuf *O,
                             int Copy) { return launch(L, P, O, Copy); };
  std::vector<std::vector<KernelLaunch>> Launches(Forms.size());
  for (size_t F = 0; F < Forms.size(); ++F)
    for (const FormKernel &K : Forms[F]) {
      std::string Why;
      KernelLaunch L = formLaunch(*G, prepare(*K.N, K.W), K, Why, LaunchKernel);
      if (!L)
        return FailAll(Why);
      Launches[F].push_back(std::move(L));
    }
  return timeForms(Launches, Pr);
}

std::vector<Measurement> CudaSession::timeForms(
    const std::vector<std::vector<std::function<CUresult(int)>>> &Launches,
    const SustainedProtocol &Pr) {
  const DriverApi &D = *G->D;
  llvm::TimeTraceScope Phase("cuda.time-forms");
  size_t NF = Launches.size();
  std::vector<Measurement> Out(NF);
  auto FailAll = [&](const std::string &Why) {
    for (Measurement &M : Out)
      M = failed(ChoiceStatus::Failed, Why);
    return Out;
  };
  int Copy = 0;
  auto RunForm = [&](size_t F, int Times) -> CUresult {
    for (int I = 0; I < Times; ++I, ++Copy)
      for (const std::function<CUresult(int)> &L : Launches[F])
        if (CUresult R = L(Copy))
          return R;
    return CUDA_SUCCESS;
  };
  auto Elapsed = [&](const char *What, double &Us) -> CUresult {
    if (CUresult R = syncEvent(D, G->E1, What))
      return R;
    float Ms = 0;
    D.cuEventElapsedTime(&Ms, G->E0, G->E1);
    Us = double(Ms) * 1000;
    return CUDA_SUCCESS;
  };
  // One run of each form sizes its warm-up and its samples.
  std::vector<int> Warm(NF), PerSample(NF);
  double BudgetMs = 0;
  for (size_t F = 0; F < NF; ++F) {
    double Us = 0;
    D.cuEventRecord(G->E0, G->Stream);
    CUresult R = RunForm(F, 1);
    D.cuEventRecord(G->E1, G->Stream);
    if (R || (R = Elapsed("a form", Us)))
      return FailAll("a form failed: " + D.errorString(R));
    Us = std::max(1.0, Us);
    Warm[F] = int(std::min(1000.0, std::ceil(Pr.WarmUs / Us)));
    PerSample[F] =
        int(std::min(1000.0, std::max(1.0, std::ceil(Pr.SampleUs / Us))));
    BudgetMs += Us * (Warm[F] + PerSample[F]) * Pr.Rounds / 1000;
  }
  if (BudgetMs > double(Opts.ChoiceTimeout.count()))
    return FailAll("the forms would run " + std::to_string(int(BudgetMs)) +
                   " ms, past the " +
                   std::to_string(Opts.ChoiceTimeout.count()) +
                   " ms choice timeout");
  std::vector<std::vector<double>> Samples(NF);
  for (unsigned Round = 0; Round < std::max(1u, Pr.Rounds); ++Round)
    for (size_t I = 0; I < NF; ++I) {
      // The first form of a round rotates: none always follows the other.
      size_t F = (Round + I) % NF;
      double Us = 0;
      CUresult R = RunForm(F, Warm[F]);
      D.cuEventRecord(G->E0, G->Stream);
      if (!R)
        R = RunForm(F, PerSample[F]);
      D.cuEventRecord(G->E1, G->Stream);
      if (R || (R = Elapsed("a form", Us)))
        return FailAll("a form failed: " + D.errorString(R));
      Samples[F].push_back(Us / PerSample[F]);
    }
  for (size_t F = 0; F < NF; ++F) {
    std::vector<double> &S = Samples[F];
    std::nth_element(S.begin(), S.begin() + S.size() / 2, S.end());
    Out[F].Us = S[S.size() / 2];
  }
  return Out;
}
