//===- CudaNcclStart.cpp - NCCL's communicator on a thread of its own -----===//
//
// ncclCommInitRank took 0.4-0.6 s of every rank on 2 H100s, most of it NCCL
// loading its kernels. startNccl exchanges NCCL's id over the Communicator
// and runs ncclCommInitRank on a detached thread, so that the GPU's context,
// NVRTC and the first nodes' inputs and checks go on meanwhile; finishNccl
// waits for it (bounded) where the first collective is measured. No choice
// is timed while a communicator opens (waitForCollectiveSetUp): timed beside
// one, cuBLAS measured 12% to 2.2x slow (docs/BENCHMARKS.md).
//
//===----------------------------------------------------------------------===//
#include "CudaCollectiveImpl.h"
#include "mtsched/Backend/Cuda/CudaApi.h"
#include "mtsched/Backend/Cuda/NcclApi.h"
#include "llvm/Support/TimeProfiler.h"
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

using namespace mtsched;
using namespace mtsched::cuda;
using namespace mtsched::nccl;

struct CollectiveRankImpl::NcclStart {
  std::mutex Mu;
  std::condition_variable Cv;
  bool Done = false;
  /// The communicator until finishNccl takes it.
  ncclComm_t Comm = nullptr;
  std::string Error;
  /// finishNccl gave up waiting: the thread may never return.
  bool Abandoned = false;
};

namespace {
/// The communicators of this process opening on their own threads.
struct OpeningComms {
  std::mutex Mu;
  std::condition_variable Cv;
  int Count = 0;
  /// When the last one opening is given up on (the choice timeout after
  /// it started): a stuck one delays the timing once, not every choice.
  std::chrono::steady_clock::time_point GiveUp;
};
/// Never destroyed: a thread whose peer vanished may still be in
/// ncclCommInitRank when the process exits.
OpeningComms &openingComms() {
  static OpeningComms *O = new OpeningComms;
  return *O;
}
} // namespace

void mtsched::waitForCollectiveSetUp() {
  OpeningComms &O = openingComms();
  std::unique_lock<std::mutex> Lock(O.Mu);
  if (O.Count == 0 || std::chrono::steady_clock::now() >= O.GiveUp)
    return;
  llvm::TimeTraceScope Scope("cuda.wait-nccl-init");
  O.Cv.wait_until(Lock, O.GiveUp, [&] { return O.Count == 0; });
}

void CollectiveRankImpl::startNccl() {
  if (NcclStarted)
    return;
  NcclStarted = true;
  llvm::TimeTraceScope Scope("cuda.nccl.start");
  int Ranks = Comm.size(), Rank = Comm.rank();
  int Count = deviceCount();
  llvm::Expected<const NcclApi &> NOr = loadNccl();
  bool NOk = bool(NOr);
  if (!NOk)
    NcclError = llvm::toString(NOr.takeError());
  else
    Nc = &*NOr;
  // init() says why a GPU per rank is missing.
  NOk &= Count >= gpusNeeded();
  std::string Id;
  if (NOk && Rank == 0) {
    ncclUniqueId U;
    if (ncclResult_t R = Nc->ncclGetUniqueId(&U)) {
      NcclError = "ncclGetUniqueId failed: " + Nc->errorString(R);
      NOk = false;
    } else {
      Id.assign(U.Internal, sizeof(U.Internal));
    }
  }
  if (!agree(NOk) ||
      Comm.broadcast(Id, 0, Opts.ChoiceTimeout) != CommStatus::Ok ||
      Id.size() != sizeof(ncclUniqueId)) {
    if (NcclError.empty())
      NcclError = "a peer rank could not open NCCL";
    return;
  }
  ncclUniqueId U;
  std::memcpy(U.Internal, Id.data(), sizeof(U.Internal));
  auto S = std::make_shared<NcclStart>();
  NcclInit = S;
  {
    OpeningComms &O = openingComms();
    std::lock_guard<std::mutex> Lock(O.Mu);
    ++O.Count;
    O.GiveUp = std::max(O.GiveUp,
                        std::chrono::steady_clock::now() + Opts.ChoiceTimeout);
  }
  // Detached: if a peer vanished, ncclCommInitRank never returns, and
  // finishNccl's bounded wait is what ends the rank's part.
  std::thread([S, N = Nc, U, Ranks, Rank, Ordinal = gpuOrdinal(Count)] {
    ncclComm_t C = nullptr;
    std::string E;
    // NCCL opens its communicator on the calling thread's device.
    llvm::Expected<DeviceInfo> I = openDevice(Ordinal);
    if (!I)
      E = llvm::toString(I.takeError());
    else if (ncclResult_t R = N->ncclCommInitRank(&C, Ranks, U, Rank)) {
      E = "ncclCommInitRank failed: " + N->errorString(R);
      C = nullptr;
    }
    {
      std::lock_guard<std::mutex> Lock(S->Mu);
      S->Comm = C;
      S->Error = std::move(E);
      S->Done = true;
      S->Cv.notify_all();
    }
    OpeningComms &O = openingComms();
    std::lock_guard<std::mutex> Lock(O.Mu);
    if (--O.Count == 0)
      O.Cv.notify_all();
  }).detach();
}

void CollectiveRankImpl::finishNccl() {
  if (NcclInit) {
    // What the rank waits for; the rest ran on startNccl's thread.
    llvm::TimeTraceScope Scope("cuda.nccl.init");
    NcclStart &S = *NcclInit;
    std::unique_lock<std::mutex> Lock(S.Mu);
    if (!S.Cv.wait_for(Lock, Opts.ChoiceTimeout, [&] { return S.Done; })) {
      S.Abandoned = true;
      NcclError = "ncclCommInitRank did not finish within " +
                  std::to_string(Opts.ChoiceTimeout.count()) + " ms";
    } else {
      NComm = S.Comm;
      S.Comm = nullptr;
      if (!S.Error.empty())
        NcclError = S.Error;
    }
  }
  if (!agree(NComm != nullptr) && NcclError.empty())
    NcclError = "ncclCommInitRank failed on a peer rank";
}

void CollectiveRankImpl::releaseNccl() {
  if (!NcclInit)
    return;
  NcclStart &S = *NcclInit;
  std::unique_lock<std::mutex> Lock(S.Mu);
  if (!S.Abandoned &&
      S.Cv.wait_for(Lock, Opts.ChoiceTimeout, [&] { return S.Done; }) && S.Comm)
    Nc->ncclCommDestroy(S.Comm);
}
