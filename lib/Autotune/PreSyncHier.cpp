//===- PreSyncHier.cpp - The pre-sync per host, then across hosts --------===//
//
// The hierarchical agreement (docs/RANKS.md): ranks agree inside their host,
// host leaders exchange one digest per host, and the verdict goes back. It
// decides what the flat agreement (PreSync.cpp) decides, and hands anything
// that differs or is late to that agreement's judgement.
//
//===----------------------------------------------------------------------===//
#include "PreSyncImpl.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/TimeProfiler.h"
#include "llvm/Support/xxhash.h"
#include <algorithm>
#include <array>
#include <chrono>

using namespace mtsched;
using namespace mtsched::presync;
using Clock = std::chrono::steady_clock;

namespace {

/// What a host's leader tells the other leaders: whether its host's
/// exchange held, its ranks' first and last arrival, smallest wait, whether
/// all were in time and agreed with each other, the hashes of its first
/// rank's fields, the ranks missing, and (from rank 0's host) rank 0's
/// cache entries.
struct HostDigest {
  bool Ok = true, InTime = true, Uniform = true;
  /// The host's exchange failed because a peer exited (not timed out).
  bool Exited = false;
  int64_t MinAt = 0, MaxAt = 0, MinWait = 0;
  uint64_t Hash[4] = {0, 0, 0, 0};
  std::vector<int> Missing;
  std::string Bundle;
};

std::string encodeDigest(const HostDigest &D) {
  std::string S;
  llvm::raw_string_ostream OS(S);
  OS << "d1\n"
     << D.Ok << D.InTime << D.Uniform << D.Exited << "\n"
     << D.MinAt << "\n"
     << D.MaxAt << "\n"
     << D.MinWait << "\n";
  for (uint64_t H : D.Hash)
    OS << llvm::utohexstr(H) << "\n";
  llvm::interleave(D.Missing, OS, ",");
  OS << "\n" << llvm::toHex(D.Bundle);
  return OS.str();
}

bool decodeDigest(llvm::StringRef S, HostDigest &D) {
  llvm::SmallVector<llvm::StringRef, 12> F;
  S.split(F, '\n');
  if (F.size() != 11 || F[0] != "d1" || F[1].size() != 4 ||
      F[2].getAsInteger(10, D.MinAt) || F[3].getAsInteger(10, D.MaxAt) ||
      F[4].getAsInteger(10, D.MinWait))
    return false;
  D.Ok = F[1][0] == '1';
  D.InTime = F[1][1] == '1';
  D.Uniform = F[1][2] == '1';
  D.Exited = F[1][3] == '1';
  for (int I = 0; I < 4; ++I)
    if (F[5 + I].getAsInteger(16, D.Hash[I]))
      return false;
  if (!F[9].empty()) {
    llvm::SmallVector<llvm::StringRef, 8> M;
    F[9].split(M, ',');
    for (llvm::StringRef X : M) {
      int R = 0;
      if (X.getAsInteger(10, R))
        return false;
      D.Missing.push_back(R);
    }
  }
  return llvm::tryGetFromHex(F[10], D.Bundle);
}

/// The world ranks of Members that Sub (over Members) says are missing.
std::vector<int> missingOf(const Communicator &Sub,
                           const std::vector<int> &Members) {
  std::vector<int> Out;
  for (int R : Sub.missingPeers())
    if (R >= 0 && size_t(R) < Members.size())
      Out.push_back(Members[size_t(R)]);
  return Out;
}

} // namespace

/// A host leader's part of the hierarchical pre-sync: its host's digest
/// from the records it gathered (HostAll, as HostGather ended), gathered
/// among the leaders; the verdict every leader computes from the same
/// digests: "broken\n<missing ranks>\n[exited]", "closer", or
/// "ok\n<skew ns>\n<min wait ns>\n<rank 0's bundle, hex>".
static std::string leaderVerdict(const PreSyncLevels &L,
                                 const AutotuneOptions &Opts,
                                 const std::vector<int> &Mine,
                                 CommStatus HostGather,
                                 const std::vector<std::string> &HostAll) {
  HostDigest D;
  D.Ok = HostGather == CommStatus::Ok;
  std::vector<Arrival> Recs(HostAll.size());
  for (size_t I = 0; D.Ok && I < HostAll.size(); ++I)
    D.Ok = decodeArrival(HostAll[I], Recs[I]);
  if (!D.Ok) {
    D.Missing = missingOf(*L.Host, Mine);
    D.Exited = HostGather == CommStatus::Failed;
  } else {
    auto Fields = [](const Arrival &A) {
      return std::array<const std::string *, 4>{&A.Flags, &A.Groups,
                                                &A.Collectives, &A.Structure};
    };
    D.MinAt = D.MaxAt = Recs[0].AtNs;
    D.MinWait = Recs[0].WaitNs;
    for (const Arrival &A : Recs) {
      D.MinAt = std::min(D.MinAt, A.AtNs);
      D.MaxAt = std::max(D.MaxAt, A.AtNs);
      D.MinWait = std::min(D.MinWait, A.WaitNs);
      D.InTime &= A.InTime;
      for (int F = 0; F < 4; ++F)
        D.Uniform &= *Fields(A)[F] == *Fields(Recs[0])[F];
    }
    for (int F = 0; F < 4; ++F)
      D.Hash[F] = llvm::xxHash64(*Fields(Recs[0])[F]);
    if (Mine.front() == 0)
      D.Bundle = Recs[0].Bundle;
  }
  // A leader waits for the slowest host: its arrival and its exchange,
  // which may itself take the deadline and one agreement timeout before its
  // leader comes here, plus one agreement timeout of slack, so that a
  // loaded machine does not turn "rank R did not come" into "a leader did
  // not answer". The leaders meet in a barrier first: a leader that never
  // comes (it hangs) is then named by the ranks that did (missingPeers),
  // as the flat agreement's barrier names a rank.
  std::vector<std::string> Digests;
  CommStatus LG =
      L.Leaders->barrier(Opts.PreSyncTimeout + Opts.AgreementTimeout * 2);
  if (LG == CommStatus::Ok)
    LG = L.Leaders->allGather(encodeDigest(D), Digests, Opts.AgreementTimeout);
  std::vector<HostDigest> All(Digests.size());
  bool Read = LG == CommStatus::Ok;
  for (size_t I = 0; Read && I < Digests.size(); ++I)
    Read = decodeDigest(Digests[I], All[I]);
  if (!Read) {
    std::vector<int> Leaders;
    for (const std::vector<int> &H : L.Hosts)
      Leaders.push_back(H.front());
    std::vector<int> M = missingOf(*L.Leaders, Leaders);
    return "broken\n" +
           llvm::join(
               llvm::map_range(M, [](int R) { return std::to_string(R); }),
               ",") +
           (LG == CommStatus::Failed ? "\nexited" : "\n");
  }
  std::vector<int> Missing;
  bool AllOk = true, Same = true, InTime = true, Exited = false;
  int64_t MinAt = All[0].MinAt, MaxAt = All[0].MaxAt, MinWait = All[0].MinWait;
  std::string Bundle;
  for (const HostDigest &H : All) {
    AllOk &= H.Ok;
    Exited |= H.Exited;
    llvm::append_range(Missing, H.Missing);
    Same &= H.Uniform && std::equal(H.Hash, H.Hash + 4, All[0].Hash);
    InTime &= H.InTime;
    MinAt = std::min(MinAt, H.MinAt);
    MaxAt = std::max(MaxAt, H.MaxAt);
    MinWait = std::min(MinWait, H.MinWait);
    if (!H.Bundle.empty())
      Bundle = H.Bundle;
  }
  InTime &= MaxAt - MinAt <= int64_t(Opts.PreSyncTimeout.count()) * 1000000;
  if (!AllOk) {
    llvm::sort(Missing);
    return "broken\n" +
           llvm::join(llvm::map_range(Missing,
                                      [](int R) { return std::to_string(R); }),
                      ",") +
           (Exited ? "\nexited" : "\n");
  }
  if (!Same || !InTime)
    return "closer";
  return "ok\n" + std::to_string(MaxAt - MinAt) + "\n" +
         std::to_string(MinWait) + "\n" + llvm::toHex(Bundle);
}

/// Per host, then across host leaders, then back: the agreement decides
/// what the flat one decides. When every rank is in step and agrees, the
/// verdict comes from reductions (all equal, first and last arrival, all in
/// time); otherwise every rank takes a closer look together, gathering every
/// record over the world as the flat agreement does and judging them with
/// the same code, so errors and late ranks are named identically.
llvm::Expected<PreSyncOutcome>
presync::runHierarchicalPreSync(Communicator &Comm, const PreSyncLevels &L,
                                const AutotuneOptions &Opts, PreSyncInput In) {
  PreSyncOutcome Out;
  const std::vector<int> &Mine = L.Hosts[size_t(L.MyHost)];
  bool Leader = Mine.front() == Comm.rank();
  Arrival Me = arrivalOf(In);
  Me.AtNs = wallNs();
  std::string Bound =
      std::to_string((Opts.PreSyncTimeout + Opts.AgreementTimeout).count());

  // 1. The host: barrier with the arrival deadline, records gathered.
  auto B0 = Clock::now();
  CommStatus Barrier;
  {
    llvm::TimeTraceScope Wait("pre-sync.arrival");
    Barrier = L.Host->barrier(Opts.PreSyncTimeout);
  }
  Me.WaitNs =
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - B0)
          .count();
  Me.InTime = Barrier == CommStatus::Ok;
  auto G0 = Clock::now();
  llvm::TimeTraceScope Agree("pre-sync.agreement");
  std::vector<std::string> HostAll;
  CommStatus HostGather =
      L.Host->allGather(encodeArrival(Me), HostAll, Opts.AgreementTimeout);

  // 2. Leaders: a digest of each host, gathered among the leaders; the
  // verdict is computed by every leader from the same digests.
  std::string Verdict;
  if (Leader)
    Verdict = leaderVerdict(L, Opts, Mine, HostGather, HostAll);
  // 3. Back inside the host. A rank waits for its leader as long as the
  // leader may wait for the slowest host, and one agreement timeout more.
  CommStatus BC = L.Host->broadcast(
      Verdict, 0, Opts.PreSyncTimeout + Opts.AgreementTimeout * 3);
  double AgreeMs = msSince(G0);
  llvm::StringRef V(Verdict);
  if (BC != CommStatus::Ok || V.starts_with("broken")) {
    Out.State = PreSyncOutcome::Broken;
    Out.Bundle = std::move(Me.Bundle);
    // A host whose exchange timed out may fail every later operation at
    // once (an MPI subgroup breaks): that is not a peer that exited.
    bool Exited = BC == CommStatus::Failed && HostGather != CommStatus::Timeout;
    if (BC != CommStatus::Ok) {
      Out.MissingRanks = missingOf(*L.Host, Mine);
      if (Out.MissingRanks.empty())
        Out.MissingRanks = {Mine.front()};
    } else {
      llvm::SmallVector<llvm::StringRef, 3> Parts;
      V.split(Parts, '\n');
      Exited = Parts.size() > 2 && Parts[2] == "exited";
      llvm::SmallVector<llvm::StringRef, 8> M;
      if (Parts.size() > 1)
        Parts[1].split(M, ',', -1, /*KeepEmpty=*/false);
      for (llvm::StringRef X : M) {
        int R = 0;
        if (!X.getAsInteger(10, R))
          Out.MissingRanks.push_back(R);
      }
    }
    // Worded as the flat agreement words them.
    if (Out.MissingRanks.empty())
      Out.Reason = Exited ? "a peer exited before the pre-sync completed"
                          : "peers did not answer within " + Bound +
                                " ms (arrival deadline + agreement timeout)";
    else if (Exited)
      Out.Reason =
          formatRanks(Out.MissingRanks) + " exited before the pre-sync";
    else
      Out.Reason = formatRanks(Out.MissingRanks) +
                   " did not reach the pre-sync within " + Bound +
                   " ms (arrival deadline + agreement timeout)";
    return Out;
  }
  if (V == "closer") {
    // Something differs or someone was late: every rank gathers every
    // record, as the flat agreement does, so the same code names it.
    std::vector<std::string> All;
    if (Comm.allGather(encodeArrival(Me), All, Opts.AgreementTimeout) !=
        CommStatus::Ok) {
      Out.State = PreSyncOutcome::Broken;
      Out.Bundle = std::move(Me.Bundle);
      Out.MissingRanks = Comm.missingPeers();
      Out.Reason = "peers did not answer the pre-sync's closer look within " +
                   std::to_string(Opts.AgreementTimeout.count()) + " ms";
      return Out;
    }
    return judgeArrivals(Comm, Opts, In, All, AgreeMs,
                         /*GlobalBarrier=*/false);
  }
  llvm::SmallVector<llvm::StringRef, 4> F;
  V.split(F, '\n');
  int64_t SkewNs = 0, MinWaitNs = 0;
  if (F.size() != 4 || F[1].getAsInteger(10, SkewNs) ||
      F[2].getAsInteger(10, MinWaitNs) ||
      !llvm::tryGetFromHex(F[3], Out.Bundle))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "rank " + std::to_string(Mine.front()) +
                                       " sent a pre-sync verdict this build "
                                       "cannot read");
  // Hosts are released one by one, so waits are not comparable across
  // hosts: the skew is the arrivals' spread (wall clocks), the cost the
  // last arrival's barrier wait plus this rank's agreement.
  Out.SkewMs = double(SkewNs) / 1e6;
  Out.CostMs = double(MinWaitNs) / 1e6 + AgreeMs;
  Out.LastWaitMs = double(MinWaitNs) / 1e6;
  Out.ExchangeMs = AgreeMs;
  return Out;
}
