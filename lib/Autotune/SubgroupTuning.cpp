//===- SubgroupTuning.cpp - Collectives on smaller process groups ---------===//
//
// A collective on a process group smaller than the world is timed by its
// group's members only, on the group's communicator, while other groups
// time theirs; one world-wide exchange then tells every rank each group's
// decisions, so every rank still prints the same IR.
//
//===----------------------------------------------------------------------===//
#include "AutotunerImpl.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/JSON.h"
#include <cmath>
#include <limits>

using namespace mtsched;

static constexpr double Inf = std::numeric_limits<double>::infinity();

std::vector<int>
Autotuner::Impl::subgroupOf(const Graph &G,
                            const MultiTemplateBufferNode &N) const {
  const auto *C = llvm::dyn_cast<CollectiveMultiTemplateBufferNode>(&N);
  if (!C)
    return {};
  std::vector<int64_t> Group = M.groupRanks(C->getGroup(), G.getWorldSize());
  // The verifier keeps ranks below the world size: a group as large as the
  // world is the world, in any order.
  if (Group.empty() || int64_t(Group.size()) >= Ranks.size())
    return {};
  return std::vector<int>(Group.begin(), Group.end());
}

std::vector<int>
Autotuner::Impl::timedBy(const Graph &G,
                         const MultiTemplateBufferNode &N) const {
  std::vector<int> Group = subgroupOf(G, N);
  if (Group.empty())
    for (int R = 0; R < Ranks.size(); ++R)
      Group.push_back(R);
  return Group;
}

Autotuner::Impl::GroupNode
Autotuner::Impl::queueGroupNode(const Graph &G, MultiTemplateBufferNode &N,
                                std::vector<int> Group) {
  result().Nodes.push_back(startRecord(M, G, N));
  return {&N, result().Nodes.size() - 1, std::move(Group)};
}

static llvm::json::Value jsonUs(double Us) {
  return std::isfinite(Us) ? llvm::json::Value(Us) : llvm::json::Value(nullptr);
}

static double usOf(const llvm::json::Value *V) {
  std::optional<double> D = V ? V->getAsNumber() : std::nullopt;
  return D ? *D : Inf;
}

/// A timing as [choice, us]: null for +inf, "skipped" for not measured.
static llvm::json::Array jsonTimings(llvm::ArrayRef<ChoiceTiming> T) {
  llvm::json::Array A;
  for (const ChoiceTiming &E : T)
    A.push_back(llvm::json::Array{
        E.Choice, E.Skipped ? llvm::json::Value("skipped") : jsonUs(E.Us)});
  return A;
}

static bool readTimings(const llvm::json::Array *A,
                        std::vector<ChoiceTiming> &Out) {
  Out.clear();
  if (!A)
    return false;
  for (const llvm::json::Value &V : *A) {
    const llvm::json::Array *P = V.getAsArray();
    if (!P || P->size() != 2 || !(*P)[0].getAsString())
      return false;
    ChoiceTiming T{(*P)[0].getAsString()->str(), usOf(&(*P)[1])};
    T.Skipped = (*P)[1].getAsString() ==
                std::optional<llvm::StringRef>(llvm::StringRef("skipped"));
    Out.push_back(std::move(T));
  }
  return true;
}

static llvm::json::Value groupRecord(const MultiTemplateBufferNode &N,
                                     const NodeResult &R) {
  const auto *C = llvm::cast<CollectiveMultiTemplateBufferNode>(&N);
  llvm::json::Array Dispatch, Choices;
  for (const DispatchEntry &E : N.getDispatch())
    Dispatch.push_back(llvm::json::Array{E.Hint, E.Choice});
  for (const ChoiceResult &CR : R.Choices)
    Choices.push_back(
        llvm::json::Object{{"status", choiceStatusName(CR.Status)},
                           {"us", jsonUs(CR.Us)},
                           {"fused_us", jsonUs(CR.FusedUs)},
                           {"fused_predicted", CR.FusedPredicted},
                           {"message", CR.Message},
                           {"fused_status", choiceStatusName(CR.FusedStatus)},
                           {"fused_message", CR.FusedMessage},
                           {"pruned", CR.Pruned}});
  return llvm::json::Object{{"decided", N.getDecision()},
                            {"fused", N.isEpilogueFused()},
                            {"fallback", C->isFallback()},
                            {"sync", syncStateName(C->getSync())},
                            {"timings", jsonTimings(N.getTimings())},
                            {"fused_timings", jsonTimings(N.getFusedTimings())},
                            {"dispatch", std::move(Dispatch)},
                            {"choices", std::move(Choices)},
                            {"result_fallback", R.Fallback},
                            {"epilogue_us", jsonUs(R.EpilogueUs)},
                            {"timed_by", llvm::json::Array(R.TimedBy)}};
}

static bool applyGroupRecord(const llvm::json::Object &O,
                             MultiTemplateBufferNode &N, NodeResult &R) {
  auto *C = llvm::cast<CollectiveMultiTemplateBufferNode>(&N);
  std::optional<llvm::StringRef> Decided = O.getString("decided");
  std::optional<llvm::StringRef> Sync = O.getString("sync");
  const llvm::json::Array *Dispatch = O.getArray("dispatch");
  const llvm::json::Array *Choices = O.getArray("choices");
  const llvm::json::Array *TimedBy = O.getArray("timed_by");
  if (!Decided || !N.findChoice(*Decided) || !Sync || !Dispatch || !Choices ||
      !TimedBy || Choices->size() != N.getChoices().size() ||
      !readTimings(O.getArray("timings"), N.getTimings()) ||
      !readTimings(O.getArray("fused_timings"), N.getFusedTimings()))
    return false;
  N.setDecision(Decided->str());
  N.setEpilogueFused(O.getBoolean("fused").value_or(false));
  C->setFallback(O.getBoolean("fallback").value_or(false));
  C->setSync(*Sync == "ok"       ? SyncState::Ok
             : *Sync == "failed" ? SyncState::Failed
                                 : SyncState::Pending);
  N.getDispatch().clear();
  N.setDispatchUnit(DispatchUnit::Bytes);
  R.Dispatch.clear();
  for (const llvm::json::Value &V : *Dispatch) {
    const llvm::json::Array *P = V.getAsArray();
    if (!P || P->size() != 2 || !(*P)[0].getAsInteger() ||
        !(*P)[1].getAsString())
      return false;
    DispatchEntry E{*(*P)[0].getAsInteger(), (*P)[1].getAsString()->str()};
    N.getDispatch().push_back(E);
    R.Dispatch.push_back(E);
  }
  R.Choices.clear();
  for (size_t I = 0; I < Choices->size(); ++I) {
    const llvm::json::Object *CO = (*Choices)[I].getAsObject();
    if (!CO)
      return false;
    ChoiceResult CR;
    CR.Name = N.getChoices()[I].Name;
    CR.Status = ChoiceStatus::Failed;
    llvm::StringRef St = CO->getString("status").value_or("");
    for (ChoiceStatus S :
         {ChoiceStatus::Ok, ChoiceStatus::Failed, ChoiceStatus::Timeout,
          ChoiceStatus::WrongResult, ChoiceStatus::Skipped})
      if (choiceStatusName(S) == St)
        CR.Status = S;
    CR.Us = usOf(CO->get("us"));
    // This rank is not in the group: it measured nothing.
    CR.LocalUs = Inf;
    CR.FusedUs = usOf(CO->get("fused_us"));
    CR.FusedPredicted = CO->getBoolean("fused_predicted").value_or(false);
    CR.Message = CO->getString("message").value_or("").str();
    if (std::optional<llvm::StringRef> FSt = CO->getString("fused_status"))
      for (ChoiceStatus S :
           {ChoiceStatus::Ok, ChoiceStatus::Failed, ChoiceStatus::WrongResult,
            ChoiceStatus::Timeout, ChoiceStatus::Skipped})
        if (choiceStatusName(S) == *FSt)
          CR.FusedStatus = S;
    CR.FusedMessage = CO->getString("fused_message").value_or("").str();
    CR.Pruned = CO->getBoolean("pruned").value_or(false);
    R.Choices.push_back(std::move(CR));
  }
  R.TimedBy.clear();
  for (const llvm::json::Value &V : *TimedBy)
    R.TimedBy.push_back(int(V.getAsInteger().value_or(-1)));
  R.Chosen = N.getDecision();
  R.EpilogueFused = N.isEpilogueFused();
  R.Fallback = O.getBoolean("result_fallback").value_or(false);
  R.EpilogueUs = usOf(O.get("epilogue_us"));
  return true;
}

void Autotuner::Impl::tuneSubgroupNodes(const Graph &G,
                                        llvm::ArrayRef<GroupNode> Nodes,
                                        bool WithFusion) {
  if (Nodes.empty())
    return;
  // How long one rank may wait for another in this phase: a member may be
  // busy with an earlier node of another group, and a rank in no group
  // waits at the exchange for every group to finish. Each member's part is
  // a sequence of steps each bounded by the choice timeout (per choice, a
  // barrier, a run and a max-reduction, unfused, fused and at each byte
  // hint; per node the cache lookup, the epilogue and one entry barrier),
  // so their sum bounds the wait and every rank computes the same.
  int64_t Steps = 1;
  for (const GroupNode &GN : Nodes)
    Steps += 3 * int64_t(GN.N->getChoices().size()) *
                 (2 + int64_t(Opts.SizeHintsBytes.size())) +
             3;
  std::chrono::milliseconds PhaseBound = Opts.ChoiceTimeout * Steps;
  // The members time each node on their group's communicator, in program
  // order; ranks outside the group go on at once, so disjoint groups run
  // side by side. Every rank still takes part in the exchange below.
  for (const GroupNode &GN : Nodes) {
    if (Ranks.isDegraded())
      break;
    if (!llvm::is_contained(GN.Ranks, rank()))
      continue;
    if (!Ranks.enterGroup(GN.Ranks, PhaseBound))
      break;
    finalize(G, *GN.N, WithFusion);
    Ranks.leaveGroup();
    // finalize appended the node's result: it takes the queued place.
    result().Nodes[GN.ResultIndex] = std::move(result().Nodes.back());
    result().Nodes.pop_back();
  }

  // Each group's first rank sends its group's decisions; one all-gather
  // over the world carries them to the ranks outside the group. A rank
  // that is degraded (its pre-sync failed, or a peer stopped answering)
  // takes no part, and then nobody's exchange succeeds.
  bool Exchanged = false;
  if (!Ranks.isDegraded()) {
    llvm::json::Array Mine;
    for (size_t J = 0; J < Nodes.size(); ++J)
      if (Nodes[J].Ranks.front() == rank())
        Mine.push_back(llvm::json::Array{
            int64_t(J),
            groupRecord(*Nodes[J].N, result().Nodes[Nodes[J].ResultIndex])});
    std::string Data;
    llvm::raw_string_ostream OS(Data);
    OS << llvm::json::Value(std::move(Mine));
    std::vector<std::string> All;
    CommStatus S = Ranks.world().allGather(OS.str(), All, PhaseBound);
    if (S != CommStatus::Ok) {
      Ranks.markBroken(
          "a peer stopped answering while the groups' decisions were shared");
    } else {
      Exchanged = true;
      for (const std::string &Text : All) {
        llvm::Expected<llvm::json::Value> V = llvm::json::parse(Text);
        if (!V) {
          llvm::consumeError(V.takeError());
          Exchanged = false;
          continue;
        }
        const llvm::json::Array *Recs = V->getAsArray();
        if (!Recs) {
          Exchanged = false;
          continue;
        }
        for (const llvm::json::Value &RV : *Recs) {
          const llvm::json::Array *P = RV.getAsArray();
          std::optional<int64_t> J =
              P && P->size() == 2 ? (*P)[0].getAsInteger() : std::nullopt;
          const llvm::json::Object *O = J ? (*P)[1].getAsObject() : nullptr;
          if (!O || *J < 0 || size_t(*J) >= Nodes.size()) {
            Exchanged = false;
            continue;
          }
          const GroupNode &GN = Nodes[*J];
          if (llvm::is_contained(GN.Ranks, rank()))
            continue;
          if (!applyGroupRecord(*O, *GN.N, result().Nodes[GN.ResultIndex]))
            Exchanged = false;
        }
      }
    }
  }
  if (Exchanged)
    return;
  // No rank can be sure the others heard every group: all fall back on
  // every queued node, members too, so the IR stays the same everywhere.
  llvm::SMLoc Loc = Nodes.front().N->getLoc();
  warn(Loc, "the decisions of collectives on process groups smaller than the "
            "world could not be shared (" +
                Ranks.reason() + "); they fall back to their default choice");
  for (const GroupNode &GN : Nodes) {
    GN.N->getTimings().clear();
    GN.N->getFusedTimings().clear();
    GN.N->getDispatch().clear();
    decideWithoutBenchmark(G, *GN.N, Ranks.reason());
    result().Nodes[GN.ResultIndex] = std::move(result().Nodes.back());
    result().Nodes.pop_back();
  }
}
