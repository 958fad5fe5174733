//===- DecideFromTable.cpp - Nodes decided from --decisions-from ----------===//
//
// --decisions-from=FILE: the nodes whose rows FILE's dispatch tables cover
// (DecisionsSource) are decided before the walk, with nothing measured;
// each node left to tune carries the reason no entry covered it.
//
//===----------------------------------------------------------------------===//
#include "AutotunerImpl.h"
#include "mtsched/Autotune/BlasEpilogue.h"
#include <chrono>
#include <cmath>
#include <limits>

using namespace mtsched;
using Clock = std::chrono::steady_clock;

static constexpr double Inf = std::numeric_limits<double>::infinity();

static double msSince(Clock::time_point T) {
  return std::chrono::duration<double, std::milli>(Clock::now() - T).count();
}

llvm::DenseMap<const MultiTemplateBufferNode *, std::string>
Autotuner::Impl::decideFromFile(const Graph &G,
                                std::vector<MultiTemplateBufferNode *> &Todo,
                                unsigned GraphIndex) {
  llvm::DenseMap<const MultiTemplateBufferNode *, std::string> Misses;
  if (!Opts.DecisionsFrom)
    return Misses;
  auto T0 = Clock::now();
  result().DecisionsFrom = Opts.DecisionsFrom->getPath().str();
  // Every rank reads the same file and keeps the same nodes.
  std::vector<MultiTemplateBufferNode *> Rest;
  for (MultiTemplateBufferNode *N : Todo) {
    DecisionsSource::Match Mt = Opts.DecisionsFrom->lookup(M, G, *N);
    if (!Mt.Miss.empty()) {
      Misses[N] = Mt.Miss;
      Rest.push_back(N);
      continue;
    }
    if (!Table) {
      decideFromTable(G, *N, Mt, /*WithFusion=*/true);
    } else {
      std::unique_ptr<MultiTemplateBufferNode> StandIn(
          llvm::cast<MultiTemplateBufferNode>(N->cloneStandIn().release()));
      decideFromTable(G, *StandIn, Mt, /*WithFusion=*/true);
      Digest->add(GraphIndex, *StandIn);
      Table->offer(GraphIndex, std::move(StandIn));
    }
    dropRecords();
  }
  Todo = std::move(Rest);
  addPhase("dispatch", msSince(T0));
  return Misses;
}

void Autotuner::Impl::noteMiss(
    const llvm::DenseMap<const MultiTemplateBufferNode *, std::string> &Misses,
    const MultiTemplateBufferNode &N) {
  auto It = Misses.find(&N);
  // The node's record says why the dispatch table did not decide it.
  if (It != Misses.end() && !result().Nodes.empty() &&
      result().Nodes.back().Name == "%" + N.getName())
    result().Nodes.back().DispatchMiss = It->second;
}

void Autotuner::Impl::decideFromTable(const Graph &G,
                                      MultiTemplateBufferNode &N,
                                      const DecisionsSource::Match &Mt,
                                      bool WithFusion) {
  NodeResult R = startRecord(M, G, N);
  N.getTimings().clear();
  N.getFusedTimings().clear();
  // The new node's own table would be a copy of FILE's, less the entries
  // it cannot run: FILE stays the table to decide from.
  N.getDispatch().clear();
  const Choice *Ch = N.findChoice(Mt.Choice);
  bool Fused = false;
  if (Ch && WithFusion && Mt.SameEpilogueFused && !N.getEpilogue().empty() &&
      Heuristic.considersFusion() &&
      canFuseEpilogue(*Ch, blasEpilogueOf(N).has_value()))
    // The cost model knows which choices cannot run fused at all.
    Fused = std::isfinite(Model.choiceUs(describeNode(M, G, N), *Ch, true));
  N.setDecision(Mt.Choice);
  N.setEpilogueFused(Fused);
  if (Fused && !whyNoEpilogue(N).empty())
    N.setEpilogueFused(Fused = false);
  std::string Why = "decided from the dispatch table of " +
                    Opts.DecisionsFrom->getPath().str() + " at hint " +
                    std::to_string(Mt.Hint);
  for (const Choice &C : N.getChoices()) {
    ChoiceResult CR;
    CR.Name = C.Name;
    CR.Status = ChoiceStatus::Skipped;
    CR.Us = CR.LocalUs = CR.FusedUs = Inf;
    CR.Message = Why;
    R.Choices.push_back(CR);
  }
  R.Chosen = Mt.Choice;
  R.EpilogueFused = Fused;
  R.FromDispatchHint = Mt.Hint;
  result().Nodes.push_back(std::move(R));
}
