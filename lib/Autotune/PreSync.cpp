//===- PreSync.cpp - The one timed agreement before measuring -------------===//
//
// The pre-sync is a barrier bounded by the arrival deadline, then one
// all-gather bounded by the agreement timeout. Every rank judges the same
// gathered data (arrival times, barrier waits, flags, fingerprints), so every
// rank reaches the same verdict: in step, a named rank late, a named rank
// missing, or ranks that differ (an error).
//
//===----------------------------------------------------------------------===//
#include "mtsched/Autotune/PreSync.h"
#include "PreSyncImpl.h"
#include "mtsched/Autotune/DecisionsSource.h"
#include "mtsched/IR/Printer.h"
#include "mtsched/Runtime/DeviceDesc.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/TimeProfiler.h"
#include "llvm/Support/xxhash.h"
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>

using namespace mtsched;
using namespace mtsched::presync;
using Clock = std::chrono::steady_clock;

double presync::msSince(Clock::time_point T) {
  return std::chrono::duration<double, std::milli>(Clock::now() - T).count();
}

std::string presync::encodeArrival(const Arrival &A) {
  // Group lines end in '\n': they travel hex-encoded, one field.
  return "v2\n" + std::string(A.InTime ? "1" : "0") + "\n" +
         std::to_string(A.AtNs) + "\n" + std::to_string(A.WaitNs) + "\n" +
         A.Flags + "\n" + llvm::toHex(A.Groups) + "\n" + A.Structure + "\n" +
         A.Collectives + "\n" + A.Bundle;
}

bool presync::decodeArrival(llvm::StringRef S, Arrival &A) {
  llvm::SmallVector<llvm::StringRef, 9> F;
  S.split(F, '\n', /*MaxSplit=*/8);
  if (F.size() != 9 || F[0] != "v2" || F[2].getAsInteger(10, A.AtNs) ||
      F[3].getAsInteger(10, A.WaitNs))
    return false;
  A.InTime = F[1] == "1";
  A.Flags = F[4].str();
  if (!llvm::tryGetFromHex(F[5], A.Groups))
    return false;
  A.Structure = F[6].str();
  A.Collectives = F[7].str();
  A.Bundle = F[8].str();
  return true;
}

namespace {

/// A node as printed, on one line (the printer may wrap choice lists).
std::string nodeText(const Node &N) {
  std::string S;
  llvm::raw_string_ostream OS(S);
  printNode(N, OS);
  OS.flush();
  std::replace(S.begin(), S.end(), '\n', ' ');
  return llvm::StringRef(S).trim().str();
}

} // namespace

uint64_t mtsched::fingerprintCollectives(
    const Graph &G,
    llvm::ArrayRef<const CollectiveMultiTemplateBufferNode *> Nodes) {
  std::string S = "@" + G.getName();
  for (const CollectiveMultiTemplateBufferNode *N : Nodes) {
    S += '|';
    S += nodeText(*N);
  }
  return llvm::xxHash64(S);
}

namespace {

/// Hashes what is written to it in fixed-size blocks, each folded into the
/// hash so far, so hashing a printed graph holds one block, not the text:
/// every rank fingerprints at once, and a 100k-node graph's text (about
/// 24 MB) per rank was most of what each thread rank cost
/// (docs/BENCHMARKS.md, "Memory of thread ranks"). The hash depends only on
/// the bytes written, not on how the writes were split.
class BlockHashOStream : public llvm::raw_ostream {
public:
  BlockHashOStream() { SetUnbuffered(); }
  uint64_t finish() {
    flushBlock();
    return Hash;
  }

private:
  static constexpr size_t BlockSize = 1 << 16;
  void write_impl(const char *Ptr, size_t Size) override {
    Written += Size;
    while (Size) {
      size_t N = std::min(Size, BlockSize - Block.size());
      Block.append(Ptr, N);
      Ptr += N;
      Size -= N;
      if (Block.size() == BlockSize)
        flushBlock();
    }
  }
  uint64_t current_pos() const override { return Written; }
  void flushBlock() {
    Block.append(reinterpret_cast<const char *>(&Hash), sizeof(Hash));
    Hash = llvm::xxHash64(Block);
    Block.clear();
  }
  std::string Block;
  uint64_t Hash = 0;
  uint64_t Written = 0;
};

} // namespace

uint64_t mtsched::fingerprintStructure(const Graph &G) {
  BlockHashOStream OS;
  printGraph(G, OS);
  return OS.finish();
}

/// The shortest decimal form of V that reads back as V: "0", "2.5".
static std::string shortest(double V) {
  for (int Digits = 1; Digits < 17; ++Digits) {
    std::string S = llvm::formatv("{0}", llvm::format("%.*g", Digits, V));
    if (std::strtod(S.c_str(), nullptr) == V)
      return S;
  }
  return llvm::formatv("{0}", llvm::format("%.17g", V));
}

std::string mtsched::groupMembership(const Module &M) {
  std::string S;
  for (const ProcessGroup &G : M.getGroups()) {
    S += "@" + G.Name + " = [";
    for (size_t I = 0; I < G.Ranks.size(); ++I)
      S += (I ? ", " : "") + std::to_string(G.Ranks[I]);
    S += "]\n";
  }
  return S;
}

std::string mtsched::protocolFlags(const AutotuneOptions &Opts,
                                   const FusionOptions &Fusion,
                                   CollectiveMode Mode) {
  std::string S;
  llvm::raw_string_ostream OS(S);
  // Words are separated by spaces: a device name's own spaces become '_'.
  std::string DeviceName = Opts.Device.Name;
  std::replace(DeviceName.begin(), DeviceName.end(), ' ', '_');
  // Everything that changes a decision or a measurement, and the bounds
  // every rank judges the pre-sync's outcome by.
  OS << "collective-mode="
     << (Mode == CollectiveMode::Deferred ? "deferred" : "immediate")
     << " fusion-heuristic=" << Fusion.Heuristic
     << " fusion-speedup-threshold=" << shortest(Fusion.SpeedupThreshold)
     << " tie-tolerance=" << shortest(Fusion.TieTolerance)
     << " max-epilogue-length=" << Fusion.MaxEpilogueLength
     << " max-extra-writes=" << Fusion.MaxExtraWrites
     << (Fusion.Horizontal ? "" : " horizontal-fusion=false")
     << (Fusion.Prologue ? "" : " prologue-fusion=false")
     << (Fusion.Reductions ? "" : " reduction-fusion=false")
     << (Fusion.Search == FusionSearch::Recursive
             ? " fusion-search=recursive max-fusion-depth=" +
                   std::to_string(Fusion.MaxFusionDepth)
             : std::string())
     << (Fusion.EpilogueThroughLayout ? " epilogue-through-layout=true" : "")
     << (Fusion.SwiGlu == SwiGluForm::Merged  ? " swiglu-form=merged"
         : Fusion.SwiGlu == SwiGluForm::Split ? " swiglu-form=split"
                                              : "")
     << (Fusion.SwiGluSustainedUs != 1000
             ? " swiglu-sustained-us=" +
                   std::to_string(Fusion.SwiGluSustainedUs)
             : std::string())
     << (Fusion.GemmSustainedUs
             ? " gemm-sustained-us=" + std::to_string(Fusion.GemmSustainedUs)
             : std::string())
     << " backend=" << Opts.Backend << " device=" << DeviceName << "("
     << llvm::utohexstr(hashDevice(Opts.Device)) << ")"
     << " bench-runs=" << Opts.BenchRuns << " warmup-runs=" << Opts.WarmupRuns
     << " bench-sample-us=" << Opts.SampleUs
     << " sim-noise=" << shortest(Opts.SimNoisePct) << " seed=" << Opts.Seed
     << " pre-sync-timeout-ms=" << Opts.PreSyncTimeout.count()
     << " agreement-timeout-ms=" << Opts.AgreementTimeout.count()
     << " size-hints-m=";
  llvm::interleave(Opts.SizeHintsM, OS, ",");
  OS << " size-hints-bytes=";
  llvm::interleave(Opts.SizeHintsBytes, OS, ",");
  OS << " prune-top-k=" << Opts.PruneTopK << " split-tuning="
     << (!Opts.SplitTuning  ? "off"
         : Opts.SplitByNode ? "nodes"
                            : "on")
     << " collective-fallback=" << Opts.CollectiveFallback
     << " cache-only=" << (Opts.CacheOnly ? "true" : "false")
     << " choice-timeout-ms=" << Opts.ChoiceTimeout.count()
     << " on-sync-failure="
     << (Opts.OnSyncFailure == SyncFailurePolicy::Error ? "error" : "fallback");
  // Only a --decisions-from file adds a word, so flags without one read as
  // before.
  if (Opts.DecisionsFrom)
    OS << " decisions-from="
       << llvm::utohexstr(Opts.DecisionsFrom->getFingerprint());
  // Only a --topology file adds a word, so flags without one read as before.
  if (!Opts.TopologyFingerprint.empty())
    OS << " topology=" << Opts.TopologyFingerprint;
  return OS.str();
}

std::string mtsched::formatRanks(llvm::ArrayRef<int> Ranks) {
  std::string S = Ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t I = 0; I < Ranks.size(); ++I)
    S += (I ? ", " : "") + std::to_string(Ranks[I]);
  return S;
}

namespace {

std::string fmtMs(double Ms) {
  std::string S;
  llvm::raw_string_ostream OS(S);
  OS << llvm::format(Ms < 10 ? "%.3f" : "%.0f", Ms);
  return OS.str();
}

/// The first `name=value` word of A and B that differs, as "--name=a" and
/// "--name=b".
std::pair<std::string, std::string> firstFlagDifference(llvm::StringRef A,
                                                        llvm::StringRef B) {
  llvm::SmallVector<llvm::StringRef, 16> WA, WB;
  A.split(WA, ' ');
  B.split(WB, ' ');
  for (size_t I = 0; I < std::max(WA.size(), WB.size()); ++I) {
    llvm::StringRef X = I < WA.size() ? WA[I] : "";
    llvm::StringRef Y = I < WB.size() ? WB[I] : "";
    if (X != Y)
      return {"--" + X.str(), "--" + Y.str()};
  }
  return {A.str(), B.str()};
}

/// The first group of A (rank 0's) and B (rank R's) that differs.
std::string firstGroupDifference(llvm::StringRef A, llvm::StringRef B, int R) {
  llvm::SmallVector<llvm::StringRef, 8> GA, GB;
  A.split(GA, '\n', -1, /*KeepEmpty=*/false);
  B.split(GB, '\n', -1, /*KeepEmpty=*/false);
  for (size_t I = 0; I < std::max(GA.size(), GB.size()); ++I) {
    llvm::StringRef X = I < GA.size() ? GA[I] : "";
    llvm::StringRef Y = I < GB.size() ? GB[I] : "";
    if (X == Y)
      continue;
    auto Has = [](int Rank, llvm::StringRef G) {
      return "rank " + std::to_string(Rank) +
             (G.empty() ? " has no more groups" : " has '" + G.str() + "'");
    };
    return Has(0, X) + ", " + Has(R, Y);
  }
  return "";
}

} // namespace

/// Names the first node where rank R's graph differs from Ref's, by a second
/// all-gather of per-node texts (collectives, which are few) or hashes.
static std::string nameDifference(Communicator &Comm,
                                  const AutotuneOptions &Opts,
                                  const PreSyncInput &In, bool Collectives,
                                  int Ref, int R) {
  // Collectives are few: their text travels, so the error can show both
  // spellings. The whole graph can be large: name and hash per node.
  std::string Mine;
  auto Add = [&](const Node &N) {
    std::string T = nodeText(N);
    Mine += Collectives
                ? T
                : N.getName() + " " + llvm::utohexstr(llvm::xxHash64(T));
    Mine += '\n';
  };
  if (Collectives)
    for (const CollectiveMultiTemplateBufferNode *N : In.Collectives)
      Add(*N);
  else
    for (const auto &N : In.G->getNodes())
      Add(*N);
  std::vector<std::string> All;
  std::string What = Collectives ? "collective nodes" : "graphs";
  std::string Generic = "ranks " + std::to_string(Ref) + " and " +
                        std::to_string(R) + " have different " + What;
  if (Comm.allGather(Mine, All, Opts.AgreementTimeout) != CommStatus::Ok)
    return Generic;
  llvm::SmallVector<llvm::StringRef, 16> A, B;
  llvm::StringRef(All[Ref]).split(A, '\n', -1, /*KeepEmpty=*/false);
  llvm::StringRef(All[R]).split(B, '\n', -1, /*KeepEmpty=*/false);
  for (size_t I = 0; I < std::max(A.size(), B.size()); ++I) {
    if (I < A.size() && I < B.size() && A[I] == B[I])
      continue;
    if (I >= B.size())
      return Generic + ": rank " + std::to_string(R) + " has no " +
             (Collectives ? "'" + A[I].split(' ').first.str() + "'"
                          : "node '%" + A[I].split(' ').first.str() + "'") +
             " (rank " + std::to_string(Ref) + " has " +
             std::to_string(A.size()) + ", rank " + std::to_string(R) +
             " has " + std::to_string(B.size()) + ")";
    if (I >= A.size())
      return Generic + ": rank " + std::to_string(R) + " has " +
             std::to_string(B.size() - A.size()) + " more (rank " +
             std::to_string(Ref) + " has " + std::to_string(A.size()) + ")";
    if (Collectives)
      return Generic + ": rank " + std::to_string(Ref) + " has '" + A[I].str() +
             "', rank " + std::to_string(R) + " has '" + B[I].str() + "'";
    auto [NA, HA] = A[I].split(' ');
    auto [NB, HB] = B[I].split(' ');
    if (NA != NB)
      return Generic + ": node " + std::to_string(I + 1) + " is '%" + NA.str() +
             "' on rank " + std::to_string(Ref) + " and '%" + NB.str() +
             "' on rank " + std::to_string(R);
    return Generic + ": node '%" + NA.str() + "' differs";
  }
  return Generic;
}

/// What this rank brings, ready before it arrives, so the agreement costs
/// exchanges and no rank's hashing; AtNs is set on arrival.
Arrival presync::arrivalOf(PreSyncInput &In) {
  Arrival Me;
  Me.Flags = In.Flags;
  Me.Groups = In.Groups;
  Me.Structure = In.CompareStructure
                     ? llvm::utohexstr(fingerprintStructure(*In.G))
                     : std::string("-");
  Me.Collectives =
      llvm::utohexstr(fingerprintCollectives(*In.G, In.Collectives));
  Me.Bundle = std::move(In.Bundle);
  return Me;
}

int64_t presync::wallNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

llvm::Expected<PreSyncOutcome>
mtsched::runPreSync(Communicator &Comm, const AutotuneOptions &Opts,
                    PreSyncInput In, const PreSyncLevels *Levels) {
  if (Levels && !Levels->Hosts.empty())
    return runHierarchicalPreSync(Comm, *Levels, Opts, std::move(In));
  PreSyncOutcome Out;
  Arrival Me = arrivalOf(In);
  Me.AtNs = wallNs();
  auto B0 = Clock::now();
  CommStatus Barrier;
  {
    llvm::TimeTraceScope Wait("pre-sync.arrival");
    Barrier = Comm.barrier(Opts.PreSyncTimeout);
  }
  Me.WaitNs =
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - B0)
          .count();
  Me.InTime = Barrier == CommStatus::Ok;

  std::vector<std::string> All;
  auto G0 = Clock::now();
  CommStatus Gather;
  {
    llvm::TimeTraceScope Agree("pre-sync.agreement");
    Gather = Comm.allGather(encodeArrival(Me), All, Opts.AgreementTimeout);
  }
  double AgreeMs = msSince(G0);
  if (Gather != CommStatus::Ok) {
    Out.State = PreSyncOutcome::Broken;
    // Nobody's entries arrived: this rank replays what it read itself.
    Out.Bundle = std::move(Me.Bundle);
    std::vector<int> Missing = Comm.missingPeers();
    Out.MissingRanks = Missing;
    std::string Bound =
        std::to_string((Opts.PreSyncTimeout + Opts.AgreementTimeout).count());
    if (Missing.empty() && Gather == CommStatus::Timeout) {
      // Every peer deposited and none is missing, yet the exchange timed
      // out at once: they gave up on it before this rank came. This rank
      // is the missing one, as its peers report it.
      Out.MissingRanks = {Comm.rank()};
      Out.Reason = "rank " + std::to_string(Comm.rank()) +
                   " did not reach the pre-sync within " + Bound +
                   " ms (arrival deadline + agreement timeout): it came after "
                   "its peers had stopped waiting";
    } else if (Missing.empty())
      Out.Reason = Gather == CommStatus::Failed
                       ? "a peer exited before the pre-sync completed"
                       : "peers did not answer within " + Bound +
                             " ms (arrival deadline + agreement timeout)";
    else if (Gather == CommStatus::Failed)
      Out.Reason = formatRanks(Missing) + " exited before the pre-sync";
    else
      Out.Reason = formatRanks(Missing) +
                   " did not reach the pre-sync within " + Bound +
                   " ms (arrival deadline + agreement timeout)";
    return Out;
  }
  return judgeArrivals(Comm, Opts, In, All, AgreeMs, /*GlobalBarrier=*/true);
}

/// Every rank's record, gathered: the same verdict on every rank. With a
/// GlobalBarrier each rank's InTime and wait are the world barrier's;
/// without (the hierarchical agreement's closer look), a rank was in time
/// if its host's barrier held and it came within the deadline of the first.
llvm::Expected<PreSyncOutcome> presync::judgeArrivals(
    Communicator &Comm, const AutotuneOptions &Opts, const PreSyncInput &In,
    const std::vector<std::string> &All, double AgreeMs, bool GlobalBarrier) {
  PreSyncOutcome Out;
  int N = Comm.size();
  std::vector<Arrival> Ranks(N);
  for (int R = 0; R < N; ++R)
    if (!decodeArrival(All[R], Ranks[R]))
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "rank " + std::to_string(R) +
              " sent a pre-sync message this build cannot read (another "
              "mtsched version?)");
  Out.Bundle = std::move(Ranks[0].Bundle);

  // Ranks that differ in what they would tune cannot be tuned together:
  // stop, naming the first difference. Every rank finds the same one.
  for (int R = 1; R < N; ++R) {
    if (Ranks[R].Flags != Ranks[0].Flags) {
      auto [A, B] = firstFlagDifference(Ranks[0].Flags, Ranks[R].Flags);
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "ranks 0 and " + std::to_string(R) +
              " run with different autotuning flags: rank 0 has '" + A +
              "', rank " + std::to_string(R) + " has '" + B + "'");
    }
  }
  for (int R = 1; R < N; ++R)
    if (Ranks[R].Groups != Ranks[0].Groups)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "ranks 0 and " + std::to_string(R) +
              " have different process groups: " +
              firstGroupDifference(Ranks[0].Groups, Ranks[R].Groups, R));
  for (bool Coll : {true, false})
    for (int R = 1; R < N; ++R) {
      const std::string &X = Coll ? Ranks[0].Collectives : Ranks[0].Structure;
      const std::string &Y = Coll ? Ranks[R].Collectives : Ranks[R].Structure;
      if (X != Y)
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            "graph '@" + In.G->getName() +
                "': " + nameDifference(Comm, Opts, In, Coll, 0, R));
    }

  std::vector<double> AtMs, WaitMs;
  for (const Arrival &A : Ranks) {
    AtMs.push_back(double(A.AtNs) / 1e6);
    WaitMs.push_back(double(A.WaitNs) / 1e6);
  }
  double FirstAt = *std::min_element(AtMs.begin(), AtMs.end());
  bool AllInTime =
      llvm::all_of(Ranks, [](const Arrival &A) { return A.InTime; });
  if (!GlobalBarrier)
    AllInTime &= *std::max_element(AtMs.begin(), AtMs.end()) - FirstAt <=
                 double(Opts.PreSyncTimeout.count());
  if (AllInTime) {
    // Released together: each rank's wait is the release time minus its
    // arrival, so no clock needs comparing. The last rank waited only for
    // the sync itself.
    double MaxWait = *std::max_element(WaitMs.begin(), WaitMs.end());
    double MinWait = *std::min_element(WaitMs.begin(), WaitMs.end());
    Out.SkewMs = MaxWait - MinWait;
    Out.CostMs = MinWait + AgreeMs;
    Out.LastWaitMs = MinWait;
    Out.ExchangeMs = AgreeMs;
    llvm::TimeTraceScope Outcome("pre-sync.ok", [&] {
      return "arrival skew " + fmtMs(MaxWait - MinWait) + " ms, cost " +
             fmtMs(MinWait + AgreeMs) + " ms";
    });
    return Out;
  }
  // The ranks that came after the first one's deadline. Wall clocks of
  // different machines may disagree a little: if none is past the
  // deadline by them, the last one to arrive is the late one.
  std::vector<int> Late;
  double D = double(Opts.PreSyncTimeout.count());
  for (int R = 0; R < N; ++R)
    if (AtMs[R] - FirstAt > D)
      Late.push_back(R);
  if (Late.empty())
    Late.push_back(
        int(std::max_element(AtMs.begin(), AtMs.end()) - AtMs.begin()));
  int FirstRank =
      int(std::min_element(AtMs.begin(), AtMs.end()) - AtMs.begin());
  double Skew = *std::max_element(AtMs.begin(), AtMs.end()) - FirstAt;
  Out.State = PreSyncOutcome::Late;
  Out.SkewMs = Skew;
  Out.LateRanks = Late;
  std::string Why =
      formatRanks(Late) + " arrived " + (Late.size() == 1 ? "" : "up to ") +
      fmtMs(Skew) + " ms after rank " + std::to_string(FirstRank) +
      ", past the " + std::to_string(Opts.PreSyncTimeout.count()) +
      " ms arrival deadline (--pre-sync-timeout-ms)";
  llvm::TimeTraceScope Outcome("pre-sync.expired", Why);
  Out.Reason = Why;
  return Out;
}

//===----------------------------------------------------------------------===//
// The hierarchical agreement (docs/RANKS.md, "The hierarchical agreement")
//===----------------------------------------------------------------------===//

std::vector<std::vector<int>>
mtsched::preSyncSubgroups(const std::vector<std::vector<int>> &Hosts) {
  std::vector<std::vector<int>> Lists = Hosts;
  if (Hosts.empty())
    return Lists;
  Lists.emplace_back();
  for (const std::vector<int> &H : Hosts)
    Lists.back().push_back(H.front());
  return Lists;
}

std::vector<std::vector<int>> mtsched::preSyncHosts(const AutotuneOptions &Opts,
                                                    int N) {
  std::vector<std::vector<int>> Hosts;
  if (N < 2 || Opts.PreSyncShape == "flat")
    return Hosts;
  bool FromTopology = int(Opts.RankHosts.size()) == N;
  if (FromTopology) {
    int H = 0;
    for (int X : Opts.RankHosts)
      H = std::max(H, X + 1);
    FromTopology = H >= 2;
    if (FromTopology) {
      Hosts.resize(size_t(H));
      for (int R = 0; R < N; ++R)
        Hosts[size_t(Opts.RankHosts[size_t(R)])].push_back(R);
      llvm::erase_if(Hosts,
                     [](const std::vector<int> &V) { return V.empty(); });
      llvm::sort(Hosts, [](const std::vector<int> &A,
                           const std::vector<int> &B) { return A[0] < B[0]; });
    }
  }
  bool Want = Opts.PreSyncShape == "hier" || FromTopology ||
              N >= int(Opts.PreSyncHierRanks);
  if (!Want)
    return {};
  if (!FromTopology) {
    // One host (or one process): groups of about sqrt(N) consecutive ranks
    // stand in for hosts, which minimises the larger of the two levels.
    int B = std::max(2, int(std::lround(std::sqrt(double(N)))));
    for (int R = 0; R < N; R += B) {
      Hosts.emplace_back();
      for (int X = R; X < std::min(N, R + B); ++X)
        Hosts.back().push_back(X);
    }
  }
  return Hosts.size() >= 2 ? Hosts : std::vector<std::vector<int>>{};
}
