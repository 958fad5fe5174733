//===- GatherDecisions.cpp - Every rank's decisions, for the report -------===//
//
// Autotuner::finish: after the pipeline, every rank's local timings and
// decisions gathered for the report (or, when nothing reports them, a hash
// of each rank's decisions, so that "decided differently" is still found).
//
//===----------------------------------------------------------------------===//
#include "AutotunerImpl.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/xxhash.h"
#include <chrono>
#include <cmath>
#include <limits>

using namespace mtsched;
using Clock = std::chrono::steady_clock;

static constexpr double Inf = std::numeric_limits<double>::infinity();

static double msSince(Clock::time_point T) {
  return std::chrono::duration<double, std::milli>(Clock::now() - T).count();
}

void Autotuner::finish(bool RankDetails) {
  Impl &I = *P;
  auto T0 = Clock::now();
  int Size = I.Ranks.size();
  Result.RankLocalUs.assign(Size, {});
  Result.RankDecisions.assign(Size, {});
  Result.BackendCounters = Bench->getCounters();
  auto Decisions = [&] {
    std::vector<std::pair<std::string, std::string>> D;
    // In decision order, which every rank shares.
    for (const NodeResult &N : Result.Nodes)
      D.emplace_back(N.Graph + "/" + N.Name, N.Chosen);
    return D;
  };
  auto LocalTimes = [&] {
    std::vector<std::vector<double>> T;
    for (const NodeResult &N : Result.Nodes) {
      T.emplace_back();
      for (const ChoiceResult &C : N.Choices)
        T.back().push_back(C.LocalUs);
    }
    return T;
  };
  Result.RankLocalUs[I.rank()] = LocalTimes();
  Result.RankDecisions[I.rank()] = Decisions();
  if (Size == 1 || I.Ranks.isBroken()) {
    I.addPhase("gather", msSince(T0));
    return;
  }

  std::chrono::milliseconds Bound =
      I.Opts.ChoiceTimeout + I.Opts.AgreementTimeout;
  if (!RankDetails) {
    // Records dropped as the walk went left their decisions' digest.
    std::string Text;
    if (I.Dropped)
      Text = "dropped\t" + llvm::utohexstr(I.DroppedDigest) + "\n";
    for (const auto &KV : Result.RankDecisions[I.rank()])
      Text += KV.first + "\t" + KV.second + "\n";
    std::string Mine = llvm::utohexstr(llvm::xxh3_64bits(Text));
    std::vector<std::string> All;
    if (I.Ranks.world().allGather(Mine, All, Bound) == CommStatus::Ok &&
        I.rank() == 0)
      for (int R = 1; R < Size; ++R)
        if (All[R] != Mine)
          Result.RankDecisions[R] = {{"<decisions hash>", All[R]}};
    I.addPhase("gather", msSince(T0));
    return;
  }

  // Every rank's view, for the report: rank 0 reports everyone's, and
  // each rank's own pre-sync cost (where the reporting rank's lies among
  // them: docs/RANKS.md, "The pre-sync at scale").
  llvm::json::Array Nodes;
  for (const std::vector<double> &Times : Result.RankLocalUs[I.rank()]) {
    llvm::json::Array A;
    for (double T : Times)
      A.push_back(std::isfinite(T) ? llvm::json::Value(T)
                                   : llvm::json::Value(nullptr));
    Nodes.push_back(std::move(A));
  }
  // A list of pairs, not an object, so the order survives the trip.
  llvm::json::Array Dec;
  for (const auto &KV : Result.RankDecisions[I.rank()])
    Dec.push_back(llvm::json::Array{KV.first, KV.second});
  std::string Mine;
  llvm::raw_string_ostream OS(Mine);
  OS << llvm::json::Value(
      llvm::json::Object{{"local", std::move(Nodes)},
                         {"decisions", std::move(Dec)},
                         {"sync_cost_ms", Result.Sync.CostMs}});
  std::vector<std::string> All;
  bool Gathered =
      I.Ranks.world().allGather(OS.str(), All, Bound) == CommStatus::Ok;
  if (!Gathered)
    All.assign(Size, "");
  // Only rank 0 reports a run whose gather succeeded: the others would
  // hold N ranks' data each, N^2 in all.
  if (I.rank() != 0)
    All.assign(Size, "");
  else if (Gathered)
    Result.Sync.RankCostsMs.assign(Size, -1);
  if (!Result.Sync.RankCostsMs.empty())
    Result.Sync.RankCostsMs[size_t(I.rank())] = Result.Sync.CostMs;
  for (int R = 0; R < Size; ++R) {
    if (R == I.rank())
      continue;
    llvm::Expected<llvm::json::Value> V = llvm::json::parse(All[R]);
    if (!V) {
      llvm::consumeError(V.takeError());
      continue;
    }
    const llvm::json::Object *O = V->getAsObject();
    if (!O)
      continue;
    if (!Result.Sync.RankCostsMs.empty())
      Result.Sync.RankCostsMs[size_t(R)] =
          O->getNumber("sync_cost_ms").value_or(-1);
    if (const llvm::json::Array *Local = O->getArray("local"))
      for (const llvm::json::Value &Node : *Local) {
        std::vector<double> Times;
        for (const llvm::json::Value &T : *Node.getAsArray())
          Times.push_back(T.getAsNumber().value_or(Inf));
        Result.RankLocalUs[R].push_back(std::move(Times));
      }
    if (const llvm::json::Array *D = O->getArray("decisions"))
      for (const llvm::json::Value &Pair : *D) {
        const llvm::json::Array *KV = Pair.getAsArray();
        if (!KV || KV->size() != 2)
          continue;
        Result.RankDecisions[R].emplace_back(
            (*KV)[0].getAsString().value_or("").str(),
            (*KV)[1].getAsString().value_or("").str());
      }
  }
  I.addPhase("gather", msSince(T0));
}
