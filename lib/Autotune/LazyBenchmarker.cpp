//===- LazyBenchmarker.cpp - A backend created on first use ---------------===//
#include "mtsched/Autotune/LazyBenchmarker.h"
#include "mtsched/Autotune/BackendRegistry.h"
#include "llvm/Support/TimeProfiler.h"
#include <atomic>
#include <limits>

using namespace mtsched;

static std::atomic<unsigned> Created{0};

LazyBackend::LazyBackend(std::string Name, std::string Version, Factory Make)
    : Name(std::move(Name)), Version(std::move(Version)),
      Make(std::move(Make)) {}

LazyBackend::~LazyBackend() = default;

unsigned LazyBackend::getCreatedCount() { return Created.load(); }

Benchmarker *LazyBackend::get() {
  if (Tried)
    return Real.get();
  Tried = true;
  // The trace shows when (and whether) a run initialised its backend.
  llvm::TimeTraceScope Scope("create benchmarker", Name);
  llvm::Expected<std::unique_ptr<Benchmarker>> B = Make();
  if (!B) {
    Error = llvm::toString(B.takeError());
    return nullptr;
  }
  // The cache keys already used the announced identity.
  if ((*B)->getBackendName() != Name || (*B)->getVersion() != Version) {
    Error = "the " + Name + " backend announced version '" + Version +
            "' but is '" + (*B)->getBackendName().str() + "' version '" +
            (*B)->getVersion() + "'";
    return nullptr;
  }
  ++Created;
  Real = std::move(*B);
  return Real.get();
}

namespace {

/// Creates the backend (a batch to build means a measurement follows) and
/// passes the batch on; builds nothing if it cannot be created.
class LazyBuilder : public Builder {
public:
  explicit LazyBuilder(std::shared_ptr<LazyBackend> Backend)
      : Backend(std::move(Backend)) {}
  std::vector<BuiltChoices> build(llvm::ArrayRef<BuildInput> Batch) override {
    if (Benchmarker *B = Backend->get())
      return B->getBuilder().build(Batch);
    std::vector<BuiltChoices> Out;
    for (const BuildInput &In : Batch)
      Out.emplace_back(In.N->getChoices().size());
    return Out;
  }
  /// The created backend's counters; none if it was never created.
  std::vector<std::pair<std::string, int64_t>> getCounters() const override {
    return Backend->isCreated()
               ? Backend->created()->getBuilder().getCounters()
               : std::vector<std::pair<std::string, int64_t>>();
  }

private:
  std::shared_ptr<LazyBackend> Backend;
};

Measurement failed(const std::string &Why) {
  return Measurement{ChoiceStatus::Failed,
                     std::numeric_limits<double>::infinity(), Why};
}

class LazyRunner : public Runner {
public:
  explicit LazyRunner(std::shared_ptr<LazyBackend> Backend)
      : Backend(std::move(Backend)) {}
  std::string getSetupError() const override { return Backend->getError(); }
  std::vector<std::pair<std::string, int64_t>> getCounters() const override {
    return Backend->isCreated()
               ? Backend->created()->getRunner().getCounters()
               : std::vector<std::pair<std::string, int64_t>>();
  }
  Measurement measure(const MultiTemplateBufferNode &N, const Workload &W,
                      const Choice &C, bool Fused,
                      const BuildResult &Built) override {
    Benchmarker *B = Backend->get();
    return B ? B->getRunner().measure(N, W, C, Fused, Built)
             : failed(Backend->getError());
  }
  Measurement measureEpilogue(const MultiTemplateBufferNode &N,
                              const Workload &W) override {
    Benchmarker *B = Backend->get();
    return B ? B->getRunner().measureEpilogue(N, W)
             : failed(Backend->getError());
  }
  std::vector<Measurement>
  measureForms(llvm::ArrayRef<std::vector<FormKernel>> Forms,
               const SustainedProtocol &P) override {
    Benchmarker *B = Backend->get();
    return B ? B->getRunner().measureForms(Forms, P)
             : std::vector<Measurement>(Forms.size(),
                                        failed(Backend->getError()));
  }

private:
  std::shared_ptr<LazyBackend> Backend;
};

} // namespace

std::unique_ptr<Benchmarker>
mtsched::createLazyBenchmarker(std::shared_ptr<LazyBackend> Backend) {
  std::string Name = Backend->getName(), Version = Backend->getVersion();
  return std::make_unique<Benchmarker>(std::move(Name), std::move(Version),
                                       std::make_unique<LazyBuilder>(Backend),
                                       std::make_unique<LazyRunner>(Backend));
}

llvm::Expected<std::unique_ptr<Benchmarker>>
mtsched::createLazyBenchmarker(const BackendRegistry &Backends,
                               const AutotuneOptions &Opts, int Rank,
                               Communicator &Comm) {
  // Auto must try its backends to know which it is: created now.
  if (Opts.Backend == "auto")
    return Backends.create(Opts, Rank, Comm);
  llvm::Expected<const BackendInfo &> B = Backends.resolve(Opts);
  if (!B)
    return B.takeError();
  // The backend keeps a reference to its options: they live with it.
  auto Kept = std::make_shared<AutotuneOptions>(Opts);
  Communicator *C = &Comm;
  BackendInfo::CreateFn Create = B->Create;
  return createLazyBenchmarker(std::make_shared<LazyBackend>(
      B->Name, B->Version,
      [Kept, Rank, C, Create]() { return Create(*Kept, Rank, *C); }));
}
