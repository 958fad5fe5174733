//===- CudaHier.cpp - The hierarchical collective on NCCL -----------------===//
//
// `hier` (ChoiceConfig: offered to groups that span hosts) composes a
// collective from NCCL calls on two sub-communicators: the ranks of one
// host (intra) and the ranks of one index across hosts (inter).
//   all_reduce:     reduce_scatter intra, all_reduce inter on the shard,
//                   all_gather intra (in place);
//   all_gather:     all_gather intra, all_gather inter (in place);
//   reduce_scatter: reduce_scatter inter, reduce_scatter intra.
// The last two need the group's ranks host-major (every host's ranks
// consecutive, hosts in order): the output's blocks are in rank order.
// Each sub-communicator has its own ncclUniqueId, made by one of its
// members and exchanged in one all-gather over the group.
//
// NCCL's calls are library calls, but the all_reduce's middle is the place
// for an epilogue: fused, after the inter-host all_reduce each rank holds
// its shard reduced over the group, and a generated kernel (the one_shot
// epilogue over one rank, CollectiveCodegen) runs the epilogue on the
// shard's rows only, in place, reading the residual at the shard's offset
// and writing the sum after the adds (`writes`) to the sum buffer's shard;
// the intra-host all_gather then gathers the epilogue's output (and the
// sum). The epilogue costs 1/per_host of the rows; the shard must be whole
// rows (hierFusedRefusal). all_gather and reduce_scatter do not fuse.
//
//===----------------------------------------------------------------------===//
#include "CudaCollectiveImpl.h"
#include "mtsched/Backend/Cuda/CudaApi.h"
#include "mtsched/Backend/Cuda/NcclApi.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/TimeProfiler.h"
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

using namespace mtsched;
using namespace mtsched::cuda;
using namespace mtsched::nccl;

namespace {

/// Two communicators opened on a thread of their own; shared, since a thread
/// whose peer vanished never returns and is left behind.
struct HierStart {
  std::mutex Mu;
  std::condition_variable Cv;
  bool Done = false, Abandoned = false;
  ncclComm_t Intra = nullptr, Inter = nullptr;
  std::string Error;
};

std::string hexId(const ncclUniqueId &U) {
  return llvm::toHex(llvm::StringRef(U.Internal, sizeof(U.Internal)));
}

bool readId(llvm::StringRef Hex, ncclUniqueId &U) {
  std::string Raw;
  if (!llvm::tryGetFromHex(Hex, Raw) || Raw.size() != sizeof(U.Internal))
    return false;
  std::memcpy(U.Internal, Raw.data(), sizeof(U.Internal));
  return true;
}

} // namespace

void CollectiveRankImpl::setUpHier() {
  if (HierTried)
    return;
  HierTried = true;
  llvm::TimeTraceScope Scope("cuda.hier.setup");
  int Ranks = Comm.size(), Rank = Comm.rank();
  std::string Err;
  bool Ok = InitOk;
  if (!Ok)
    Err = InitError;
  if (Ok) {
    llvm::Expected<const NcclApi &> NOr = loadNccl();
    if (!NOr) {
      Err = llvm::toString(NOr.takeError());
      Ok = false;
    } else {
      Nc = &*NOr;
    }
  }
  // Where every rank is: one all-gather of the hosts' names.
  std::vector<std::string> Names;
  if (Comm.allGather(Opts.HostName, Names, Opts.ChoiceTimeout) !=
          CommStatus::Ok ||
      int(Names.size()) != Ranks) {
    HierError = "the ranks could not exchange their hosts";
    agree(false);
    return;
  }
  // Hosts in order of their first rank; each rank's index inside its host.
  llvm::StringMap<int> HostIdx;
  std::vector<int> HostOf(static_cast<size_t>(Ranks));
  std::vector<int> LocalOf(static_cast<size_t>(Ranks));
  std::vector<int> Count;
  for (int R = 0; R < Ranks; ++R) {
    auto [It, New] = HostIdx.try_emplace(Names[size_t(R)], int(Count.size()));
    if (New)
      Count.push_back(0);
    HostOf[size_t(R)] = It->second;
    LocalOf[size_t(R)] = Count[size_t(It->second)]++;
  }
  HierHosts = int(Count.size());
  HierPerHost = Count.front();
  HierHost = HostOf[size_t(Rank)];
  HierLocal = LocalOf[size_t(Rank)];
  HierHostMajor = true;
  for (int R = 0; R < Ranks; ++R)
    HierHostMajor &= R == HostOf[size_t(R)] * HierPerHost + LocalOf[size_t(R)];
  if (Ok && HierHosts < 2) {
    Err = "'hier' needs a group on two or more hosts; this one is on one";
    Ok = false;
  }
  if (Ok && llvm::any_of(Count, [&](int C) { return C != HierPerHost; })) {
    Err = "'hier' needs the same number of the group's ranks on every host";
    Ok = false;
  }
  // Ids: the first rank of each host makes its host's, the ranks of the
  // first host make the inter-host one of their index.
  std::string Mine;
  if (Ok) {
    ncclUniqueId Intra, Inter;
    ncclResult_t R1 = HierLocal == 0 ? Nc->ncclGetUniqueId(&Intra) : 0;
    ncclResult_t R2 = HierHost == 0 ? Nc->ncclGetUniqueId(&Inter) : 0;
    if (R1 || R2) {
      Err = "ncclGetUniqueId failed: " + Nc->errorString(R1 ? R1 : R2);
      Ok = false;
    } else {
      Mine = (HierLocal == 0 ? hexId(Intra) : "") + " " +
             (HierHost == 0 ? hexId(Inter) : "");
    }
  }
  std::vector<std::string> Ids;
  if (!agree(Ok) ||
      Comm.allGather(Mine, Ids, Opts.ChoiceTimeout) != CommStatus::Ok ||
      int(Ids.size()) != Ranks) {
    HierError = Err.empty() ? "a peer rank could not set up 'hier'" : Err;
    return;
  }
  // The ranks that made this rank's two ids.
  int IntraMaker = -1, InterMaker = -1;
  for (int R = 0; R < Ranks; ++R) {
    if (HostOf[size_t(R)] == HierHost && LocalOf[size_t(R)] == 0)
      IntraMaker = R;
    if (HostOf[size_t(R)] == 0 && LocalOf[size_t(R)] == HierLocal)
      InterMaker = R;
  }
  ncclUniqueId IntraId, InterId;
  bool IdsOk =
      IntraMaker >= 0 && InterMaker >= 0 &&
      readId(llvm::StringRef(Ids[size_t(IntraMaker)]).split(' ').first,
             IntraId) &&
      readId(llvm::StringRef(Ids[size_t(InterMaker)]).split(' ').second,
             InterId);
  if (!agree(IdsOk)) {
    HierError = "the ranks could not exchange NCCL ids for 'hier'";
    return;
  }
  // Both communicators on a thread of their own, as startNccl does: a peer
  // that vanished leaves ncclCommInitRank waiting forever, and the wait
  // here is bounded. Every rank opens the intra-host one first, so no
  // host's ranks wait for another's.
  auto S = std::make_shared<HierStart>();
  std::thread([S, N = Nc, IntraId, InterId, PerHost = HierPerHost,
               Local = HierLocal, Hosts = HierHosts, Host = HierHost,
               Ordinal = Dev.Ordinal] {
    ncclComm_t A = nullptr, B = nullptr;
    std::string E;
    llvm::Expected<DeviceInfo> I = openDevice(Ordinal);
    if (!I)
      E = llvm::toString(I.takeError());
    else if (ncclResult_t R = N->ncclCommInitRank(&A, PerHost, IntraId, Local))
      E = "ncclCommInitRank (intra-host) failed: " + N->errorString(R);
    else if (ncclResult_t R = N->ncclCommInitRank(&B, Hosts, InterId, Host))
      E = "ncclCommInitRank (inter-host) failed: " + N->errorString(R);
    std::lock_guard<std::mutex> Lock(S->Mu);
    S->Intra = A;
    S->Inter = B;
    S->Error = std::move(E);
    S->Done = true;
    S->Cv.notify_all();
  }).detach();
  {
    std::unique_lock<std::mutex> Lock(S->Mu);
    if (!S->Cv.wait_for(Lock, Opts.ChoiceTimeout, [&] { return S->Done; })) {
      S->Abandoned = true;
      Err = "NCCL's communicators for 'hier' did not open within " +
            std::to_string(Opts.ChoiceTimeout.count()) + " ms";
    } else {
      IntraComm = S->Intra;
      InterComm = S->Inter;
      Err = S->Error;
    }
  }
  if (!agree(Err.empty() && IntraComm && InterComm))
    HierError = Err.empty() ? "a peer rank could not open NCCL's "
                              "communicators for 'hier'"
                            : Err;
}

void CollectiveRankImpl::releaseHier() {
  if (IntraComm)
    Nc->ncclCommDestroy(IntraComm);
  if (InterComm)
    Nc->ncclCommDestroy(InterComm);
  IntraComm = InterComm = nullptr;
  if (HierScratch)
    D->cuMemFree(HierScratch);
  HierScratch = 0;
}

bool CollectiveRankImpl::setUpHierLaunch(const MultiTemplateBufferNode &N,
                                         const Workload &W, bool Fused,
                                         CollectiveLaunch &L,
                                         std::string &Err) {
  if (Fused) {
    Err = hierFusedRefusal(W, HierPerHost);
    if (!Err.empty())
      return false;
    const Value *BiasV = nullptr, *ResV = nullptr, *GammaV = nullptr;
    llvm::Expected<CollectiveEpilogue> EOr =
        collectiveEpilogueOf(N, BiasV, ResV, GammaV);
    if (!EOr) {
      Err = llvm::toString(EOr.takeError());
      return false;
    }
    L.Epi = *EOr;
    if (L.Epi.WriteSum && B.Sum.empty()) {
      Err = "no buffer for the epilogue's second output";
      return false;
    }
  }
  if (!isFloatDType(B.T)) {
    Err = "hier reduces and gathers float tensors here, not " +
          std::string(dtypeName(B.T));
    return false;
  }
  int DT = B.T == DType::BF16  ? ncclBfloat16
           : B.T == DType::F16 ? ncclFloat16
                               : ncclFloat32;
  size_t Es = dtypeBytes(B.T);
  size_t PerHost = size_t(HierPerHost), Host = size_t(HierHost),
         Local = size_t(HierLocal);
  auto First = [](ncclResult_t A, ncclResult_t B2, ncclResult_t C = 0) {
    return CUresult(A ? A : B2 ? B2 : C);
  };
  switch (W.Collective) {
  case CollectiveKind::AllReduce: {
    size_t Count = size_t(B.InElems);
    if (Count % PerHost) {
      Err = "'hier' splits an all_reduce of " + std::to_string(Count) +
            " elements into " + std::to_string(PerHost) +
            " shards: not a multiple";
      return false;
    }
    size_t Shard = Count / PerHost;
    if (Fused)
      return setUpHierFusedLaunch(DT, Shard, L, Err);
    L.Launch = [this, DT, Shard, Es, Local, First](int Cp) {
      CUdeviceptr Out = B.Out[size_t(Cp)];
      void *Mine = (void *)(Out + Local * Shard * Es);
      ncclResult_t R1 =
          Nc->ncclReduceScatter((void *)B.In[size_t(Cp)], Mine, Shard, DT,
                                ncclSum, IntraComm, Stream);
      ncclResult_t R2 = R1 ? R1
                           : Nc->ncclAllReduce(Mine, Mine, Shard, DT, ncclSum,
                                               InterComm, Stream);
      ncclResult_t R3 = R2 ? R2
                           : Nc->ncclAllGather(Mine, (void *)Out, Shard, DT,
                                               IntraComm, Stream);
      return First(R1, R2, R3);
    };
    return true;
  }
  case CollectiveKind::AllGather:
  case CollectiveKind::ReduceScatter:
    if (!HierHostMajor) {
      Err = "'hier' gathers and scatters only groups whose ranks are "
            "host-major (each host's ranks consecutive)";
      return false;
    }
    if (W.Collective == CollectiveKind::AllGather) {
      size_t N = size_t(B.InElems);
      L.Launch = [this, DT, N, Es, PerHost, Host, First](int Cp) {
        CUdeviceptr Out = B.Out[size_t(Cp)];
        void *Block = (void *)(Out + Host * PerHost * N * Es);
        ncclResult_t R1 = Nc->ncclAllGather((void *)B.In[size_t(Cp)], Block, N,
                                            DT, IntraComm, Stream);
        ncclResult_t R2 =
            R1 ? R1
               : Nc->ncclAllGather(Block, (void *)Out, PerHost * N, DT,
                                   InterComm, Stream);
        return First(R1, R2);
      };
      return true;
    } else {
      size_t N = size_t(B.OutElems);
      size_t Need = PerHost * N * Es;
      if (HierScratchBytes < Need) {
        if (HierScratch)
          D->cuMemFree(HierScratch);
        HierScratch = 0;
        HierScratchBytes = 0;
        if (CUresult R = D->cuMemAlloc(&HierScratch, Need)) {
          Err = "cannot allocate hier's scratch (" + std::to_string(Need) +
                " bytes): " + D->errorString(R);
          return false;
        }
        HierScratchBytes = Need;
      }
      L.Launch = [this, DT, N, PerHost, First](int Cp) {
        void *Tmp = (void *)HierScratch;
        ncclResult_t R1 =
            Nc->ncclReduceScatter((void *)B.In[size_t(Cp)], Tmp, PerHost * N,
                                  DT, ncclSum, InterComm, Stream);
        ncclResult_t R2 =
            R1 ? R1
               : Nc->ncclReduceScatter(Tmp, (void *)B.Out[size_t(Cp)], N, DT,
                                       ncclSum, IntraComm, Stream);
        return First(R1, R2);
      };
      return true;
    }
  default:
    Err = "'hier' is not timed for " +
          std::string(collectiveKindName(W.Collective));
    return false;
  }
}

bool CollectiveRankImpl::setUpHierFusedLaunch(int DT, size_t Shard,
                                              CollectiveLaunch &L,
                                              std::string &Err) {
  CollectiveKernel K;
  CUfunction F =
      collectiveKernel(CollectiveKind::AllReduce, CollectiveAlgo::Hier,
                       int64_t(Shard), L.Epi, K, Err);
  if (!F)
    return false;
  size_t Off = size_t(HierLocal) * Shard * dtypeBytes(B.T);
  bool WriteSum = L.Epi.WriteSum;
  L.Launch = [this, F, K, DT, Shard, Off, WriteSum](int Cp) {
    CUdeviceptr Out = B.Out[size_t(Cp)];
    void *Mine = (void *)(Out + Off);
    ncclResult_t R = Nc->ncclReduceScatter(
        (void *)B.In[size_t(Cp)], Mine, Shard, DT, ncclSum, IntraComm, Stream);
    if (!R)
      R = Nc->ncclAllReduce(Mine, Mine, Shard, DT, ncclSum, InterComm, Stream);
    if (R)
      return CUresult(R);
    // The epilogue on the shard, in place: one_shot's body over one rank
    // (ins and outs the shard, the residual at its offset; the bias and the
    // weights are a row long and the shard starts a row).
    MtPtrs In{}, Sums{}, Fl{};
    In.P[0] = Out + Off;
    if (WriteSum)
      Sums.P[0] = B.Sum[size_t(Cp)] + Off;
    unsigned Rank = 0;
    CUdeviceptr Bi = B.Bias, Re = B.Res ? B.Res + Off : 0, Ga = B.Gamma;
    void *Args[] = {&In, &In, &Fl, &Rank, &Bi, &Re, &Ga, &Sums};
    if (CUresult KR = D->cuLaunchKernel(F, K.GridX, 1, 1, K.BlockX, 1, 1, 0,
                                        Stream, Args, nullptr))
      return KR;
    // Gather the epilogue's output, and the sum beside it, inside the host
    // (in place: each rank's shard already sits at its place).
    R = Nc->ncclGroupStart();
    if (!R)
      R = Nc->ncclAllGather(Mine, (void *)Out, Shard, DT, IntraComm, Stream);
    if (!R && WriteSum) {
      CUdeviceptr Sum = B.Sum[size_t(Cp)];
      R = Nc->ncclAllGather((void *)(Sum + Off), (void *)Sum, Shard, DT,
                            IntraComm, Stream);
    }
    ncclResult_t RE = Nc->ncclGroupEnd();
    return CUresult(R ? R : RE);
  };
  return true;
}
