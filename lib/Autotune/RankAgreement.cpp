//===- RankAgreement.cpp - The cross-rank layer of the autotuner ----------===//
#include "mtsched/Autotune/RankAgreement.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/TimeProfiler.h"
#include <thread>

using namespace mtsched;

char RankStoppedError::ID = 0;

/// How a subgroup's records are keyed: "@" and its ranks.
static std::string groupKeyOf(const std::vector<int> &Ranks) {
  return "@" + llvm::join(llvm::map_range(
                              Ranks, [](int R) { return std::to_string(R); }),
                          ",");
}

RankAgreement::RankAgreement(const AutotuneOptions &Opts, Communicator &World,
                             RankHooks Hooks)
    : Opts(Opts), World(World), Hooks(std::move(Hooks)), NodeComm(&World) {}

llvm::Error RankAgreement::applyRankFaults() {
  if (FaultsApplied)
    return llvm::Error::success();
  FaultsApplied = true;
  if (const Fault *F = Opts.Faults.rankFault(Fault::Kind::Late, rank())) {
    std::chrono::milliseconds D(F->DelayMs);
    if (Hooks.Late)
      Hooks.Late(D);
    else
      std::this_thread::sleep_for(D);
  }
  if (Opts.Faults.rankFault(Fault::Kind::Exit, rank())) {
    if (Hooks.Exit)
      Hooks.Exit();
    return llvm::make_error<RankStoppedError>("rank " + std::to_string(rank()) +
                                              " exited (injected fault)");
  }
  if (Opts.Faults.rankFault(Fault::Kind::Hang, rank())) {
    if (Hooks.Hang)
      Hooks.Hang();
    return llvm::make_error<RankStoppedError>("rank " + std::to_string(rank()) +
                                              " hung (injected fault)");
  }
  return llvm::Error::success();
}

llvm::Expected<std::string> RankAgreement::sync(PreSyncInput In, SyncResult &SR,
                                                std::string &Bundle) {
  llvm::TimeTraceScope Scope("pre-sync");
  if (Degraded)
    return Reason;
  bool First = SR.Count++ == 0;
  if (First)
    SR.DeadlineMs = double(Opts.PreSyncTimeout.count());
  if (!Levels) {
    // Made once: createSubgroup is called once per rank list, and a host's
    // list may be a process group's too (GroupComms holds both).
    Levels.emplace();
    Levels->Hosts = preSyncHosts(Opts, World.size());
    // Every rank asks about every list, so all of them run the same shape.
    if (!llvm::all_of(preSyncSubgroups(Levels->Hosts),
                      [&](const std::vector<int> &L) {
                        return World.createsSubgroupAtOnce(L);
                      }))
      Levels->Hosts.clear();
    for (size_t H = 0; H < Levels->Hosts.size(); ++H)
      if (llvm::is_contained(Levels->Hosts[H], rank()))
        Levels->MyHost = int(H);
    std::vector<int> Leaders;
    for (const std::vector<int> &H : Levels->Hosts)
      Leaders.push_back(H.front());
    if (!Levels->Hosts.empty()) {
      const std::vector<int> &Mine = Levels->Hosts[size_t(Levels->MyHost)];
      // Subgroups made at once are not refused; were one to be, the flat
      // agreement is as good.
      Communicator *Host = nullptr, *Lead = nullptr;
      if (llvm::Expected<Communicator &> H = subgroup(Mine))
        Host = &*H;
      else
        llvm::consumeError(H.takeError());
      if (Host && Mine.front() == rank()) {
        if (llvm::Expected<Communicator &> LC = subgroup(Leaders))
          Lead = &*LC;
        else
          llvm::consumeError(LC.takeError());
      }
      if (!Host || (Mine.front() == rank() && !Lead)) {
        Levels->Hosts.clear();
      } else {
        Levels->Host = Host;
        Levels->Leaders = Lead;
      }
    }
  }
  if (First)
    SR.Shape = Levels->Hosts.empty()
                   ? "flat"
                   : "hier " + std::to_string(Levels->Hosts.size()) + " hosts";
  llvm::Expected<PreSyncOutcome> O =
      runPreSync(World, Opts, std::move(In), &*Levels);
  if (!O)
    return O.takeError();
  if (First) {
    SR.SkewMs = O->SkewMs;
    SR.CostMs = O->CostMs;
    SR.LastWaitMs = O->LastWaitMs;
    SR.ExchangeMs = O->ExchangeMs;
    SR.LateRanks = O->LateRanks;
    SR.MissingRanks = O->MissingRanks;
  }
  Bundle = std::move(O->Bundle);
  if (O->State == PreSyncOutcome::Broken)
    markBroken(O->Reason);
  else
    Agreed = true;
  return O->Reason;
}

llvm::Expected<Communicator &>
RankAgreement::subgroup(const std::vector<int> &Ranks) {
  auto It = GroupComms.find(Ranks);
  if (It == GroupComms.end()) {
    llvm::Expected<std::unique_ptr<Communicator>> Sub =
        World.createSubgroup(Ranks);
    if (!Sub)
      return Sub.takeError();
    It = GroupComms.emplace(Ranks, std::move(*Sub)).first;
  }
  return *It->second;
}

bool RankAgreement::enterGroup(const std::vector<int> &Ranks,
                               std::chrono::milliseconds Bound) {
  llvm::Expected<Communicator &> Sub = subgroup(Ranks);
  if (!Sub) {
    markBroken(llvm::toString(Sub.takeError()));
    return false;
  }
  // Members meet first with the phase's bound, so one still busy with
  // another group's node is waited for; later steps are prompt.
  if (Sub->barrier(Bound) != CommStatus::Ok) {
    markBroken("a peer stopped answering during benchmarking");
    return false;
  }
  NodeComm = &*Sub;
  NodeGroupKey = groupKeyOf(Ranks);
  return true;
}

void RankAgreement::replayAsGroup(const std::vector<int> &Ranks) {
  NodeComm = &World;
  NodeGroupKey = groupKeyOf(Ranks);
}

void RankAgreement::leaveGroup() {
  NodeComm = &World;
  NodeGroupKey.clear();
}

bool RankAgreement::agreeMax(std::vector<double> &Values,
                             std::chrono::milliseconds Bound,
                             llvm::StringRef Why) {
  if (NodeComm->allReduceMax(Values, Bound) == CommStatus::Ok)
    return true;
  markBroken(Why.str());
  return false;
}

bool RankAgreement::agreeMaxNamingPeers(std::vector<double> &Values,
                                        std::chrono::milliseconds Bound) {
  if (NodeComm->allReduceMax(Values, Bound) == CommStatus::Ok)
    return true;
  std::vector<int> Missing = NodeComm->missingPeers();
  markBroken((Missing.empty() ? std::string("a peer") : formatRanks(Missing)) +
             " stopped answering during benchmarking");
  return false;
}

bool RankAgreement::barrier(std::chrono::milliseconds Bound,
                            llvm::StringRef Why) {
  if (NodeComm->barrier(Bound) == CommStatus::Ok)
    return true;
  markBroken(Why.str());
  return false;
}

bool RankAgreement::broadcastFromLeader(std::string &Data,
                                        std::chrono::milliseconds Bound,
                                        llvm::StringRef Why) {
  if (NodeComm->broadcast(Data, 0, Bound) == CommStatus::Ok)
    return true;
  markBroken(Why.str());
  return false;
}
