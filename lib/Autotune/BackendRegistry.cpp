//===- BackendRegistry.cpp - The backends choices can be timed on ---------===//
#include "mtsched/Autotune/BackendRegistry.h"
#include "mtsched/Runtime/Communicator.h"
#include "llvm/Support/raw_ostream.h"
#include <cassert>
#include <mutex>

using namespace mtsched;

static llvm::Error fail(const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Msg);
}

// Out of line: the vtable lives here.
PreparedGraph::~PreparedGraph() = default;

void BackendRegistry::add(BackendInfo B) {
  assert(!lookup(B.Name) && B.Name != "auto" && "backend added twice");
  Backends.push_back(std::move(B));
}

const BackendInfo *BackendRegistry::lookup(llvm::StringRef Name) const {
  for (const BackendInfo &B : Backends)
    if (B.Name == Name)
      return &B;
  return nullptr;
}

std::string BackendRegistry::names() const {
  std::string S;
  for (const BackendInfo &B : Backends)
    S += B.Name + ", ";
  return S + "auto";
}

llvm::Expected<const BackendInfo &>
BackendRegistry::resolve(const AutotuneOptions &Opts) const {
  if (Opts.Backend != "auto") {
    if (const BackendInfo *B = lookup(Opts.Backend))
      return *B;
    return fail("unknown backend '" + Opts.Backend +
                "' (this build has: " + names() + ")");
  }
  if (Backends.empty())
    return fail("this build has no backend");
  // Say once per process which backend auto picked, and why.
  static std::once_flag Said;
  std::string Why;
  for (const BackendInfo &B : Backends) {
    if (!B.TriedByAuto)
      continue;
    // Auto needs to know the device is there, not only its library.
    llvm::Error E = B.Probe ? B.Probe(Opts) : llvm::Error::success();
    if (!E) {
      std::call_once(Said, [&] {
        llvm::errs() << "mtsched-opt: --backend=auto: using " << B.Name << '\n';
      });
      return B;
    }
    Why += (Why.empty() ? "" : "; ") + llvm::toString(std::move(E));
  }
  const BackendInfo &Default = Backends.front();
  std::call_once(Said, [&] {
    llvm::errs() << "mtsched-opt: --backend=auto: using " << Default.Name
                 << (Why.empty() ? "" : " (" + Why + ")") << '\n';
  });
  return Default;
}

llvm::Expected<std::unique_ptr<Benchmarker>>
BackendRegistry::create(const AutotuneOptions &Opts, int Rank,
                        Communicator &Comm) const {
  llvm::Expected<const BackendInfo &> B = resolve(Opts);
  if (!B)
    return B.takeError();
  return B->Create(Opts, Rank, Comm);
}

const BackendInfo *BackendRegistry::executor() const {
  for (const BackendInfo &B : Backends)
    if (B.RunGraph)
      return &B;
  return nullptr;
}

const BackendInfo *BackendRegistry::kernelDumper() const {
  for (const BackendInfo &B : Backends)
    if (B.DumpKernels)
      return &B;
  return nullptr;
}
