//===- LazyBenchmarker.cpp - A backend created on first use ---------------===//
#include "mtsched/Autotune/LazyBenchmarker.h"
#include "mtsched/Autotune/BackendRegistry.h"
#include "llvm/Support/TimeProfiler.h"
#include <atomic>
#include <limits>

using namespace mtsched;

static std::atomic<unsigned> Created{0};

LazyBenchmarker::LazyBenchmarker(std::string Name, std::string Version,
                                 Factory Make)
    : Name(std::move(Name)), Version(std::move(Version)),
      Make(std::move(Make)) {}

LazyBenchmarker::~LazyBenchmarker() = default;

unsigned LazyBenchmarker::getCreatedCount() { return Created.load(); }

Benchmarker *LazyBenchmarker::get() {
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
  for (const auto &[N, Kept] : PendingKept)
    Real->expectChoices(*N, Kept);
  PendingKept.clear();
  return Real.get();
}

void LazyBenchmarker::expectChoices(const MultiTemplateBufferNode &N,
                                    const std::vector<bool> &Kept) {
  if (Real)
    Real->expectChoices(N, Kept);
  else if (!Tried)
    PendingKept[&N] = Kept;
}

void LazyBenchmarker::prepareAhead(const MultiTemplateBufferNode &N,
                                   const Workload &W,
                                   const std::vector<bool> &Kept) {
  if (Benchmarker *B = get())
    B->prepareAhead(N, W, Kept);
}

void LazyBenchmarker::prepareCollectives() {
  if (Benchmarker *B = get())
    B->prepareCollectives();
}

void LazyBenchmarker::waitIdle() {
  if (Real)
    Real->waitIdle();
}

static Measurement failed(const std::string &Why) {
  return Measurement{ChoiceStatus::Failed,
                     std::numeric_limits<double>::infinity(), Why};
}

Measurement LazyBenchmarker::measure(const MultiTemplateBufferNode &N,
                                     const Workload &W, const Choice &C,
                                     bool Fused) {
  Benchmarker *B = get();
  return B ? B->measure(N, W, C, Fused) : failed(Error);
}

Measurement LazyBenchmarker::measureEpilogue(const MultiTemplateBufferNode &N,
                                             const Workload &W) {
  Benchmarker *B = get();
  return B ? B->measureEpilogue(N, W) : failed(Error);
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
  return std::make_unique<LazyBenchmarker>(
      B->Name, B->Version,
      [Kept, Rank, C, Create]() { return Create(*Kept, Rank, *C); });
}
