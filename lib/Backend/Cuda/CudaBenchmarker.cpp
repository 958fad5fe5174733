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
// This file opens and frees the session and registers the backend;
// CudaBenchPrepare.cpp builds and prepares, CudaBenchMeasure.cpp runs each
// kind of measurement and CudaBenchRun.cpp checks and times it.
//
//===----------------------------------------------------------------------===//
#include "mtsched/Backend/Cuda/CudaBenchmarker.h"
#include "CudaBenchmarkerImpl.h"
#include "mtsched/Backend/Cuda/CollectiveCodegen.h"
#include "mtsched/Backend/Cuda/CudaApi.h"
#include "mtsched/Backend/Cuda/CudaCodegen.h"
#include "mtsched/Backend/Cuda/NcclApi.h"
#include "mtsched/Backend/Cuda/PeerAccess.h"
#include <memory>
#include <mutex>

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
  std::vector<Measurement>
  measureForms(llvm::ArrayRef<std::vector<FormKernel>> Forms,
               const SustainedProtocol &P) override {
    return S->measureForms(Forms, P);
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
