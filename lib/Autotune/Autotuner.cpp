//===- Autotuner.cpp - One rank's autotuning session ----------------------===//
//
// The walk over a graph: collect the undecided nodes, one pre-sync, then
// each node through the measurement stack (ChoiceMeasurer) and the
// decision step (Decision.h); the layers themselves live in their own files.
//
//===----------------------------------------------------------------------===//
#include "AutotunerImpl.h"
#include "mtsched/Autotune/Cache.h"
#include "mtsched/Schedule/Schedule.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/TimeProfiler.h"
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

Autotuner::Impl::Impl(Autotuner &Self, const AutotuneOptions &Opts,
                      const FusionOptions &Fusion,
                      const FusionHeuristic &Heuristic, Communicator &Comm,
                      Diagnostics &Diags, const Module &M, RankHooks Hooks)
    : Self(Self), Opts(Opts), Model(*Self.Model), Fusion(Fusion), Diags(Diags),
      M(M), Heuristic(Heuristic), Ranks(this->Opts, Comm, std::move(Hooks)),
      Store(this->Opts),
      Measurer(this->Opts, Self.Bench->getBuilder(), Self.Bench->getRunner(),
               *Self.Model, Ranks, Store, Self.Result) {
  // The pre-sync's flags name the heuristic that decides, not a name the
  // caller may have left stale.
  this->Fusion.Heuristic = Heuristic.getName().str();
  if (Store.getCache())
    Self.Result.CacheDir = Opts.CacheDir;
  if (Opts.Progress)
    if (std::unique_ptr<AutotuneObserver> O = createProgressLine(Comm.rank()))
      Observers.push_back(std::move(O));
}

Autotuner::Autotuner(const AutotuneOptions &Opts, const FusionOptions &Fusion,
                     const FusionHeuristic &Heuristic, CollectiveMode Mode,
                     Communicator &Comm, std::unique_ptr<Benchmarker> Bench,
                     std::unique_ptr<TimePredictor> Model, Diagnostics &Diags,
                     const Module &M, RankHooks Hooks)
    : Mode(Mode), Bench(std::move(Bench)), Model(std::move(Model)) {
  P = std::make_unique<Impl>(*this, Opts, Fusion, Heuristic, Comm, Diags, M,
                             std::move(Hooks));
}

Autotuner::~Autotuner() = default;

void Autotuner::setDecisionTable(DecisionTable *Table, DecisionDigest *Digest) {
  P->Table = Table;
  P->Digest = Digest;
}

void Autotuner::setKeepNodeRecords(bool Keep) { P->KeepRecords = Keep; }

void Autotuner::Impl::dropRecords() {
  if (KeepRecords)
    return;
  for (const NodeResult &R : result().Nodes) {
    std::string Line = llvm::utohexstr(DroppedDigest) + R.Graph + "/" + R.Name +
                       "\t" + R.Chosen + "\n";
    DroppedDigest = llvm::xxh3_64bits(Line);
    Dropped = true;
  }
  result().Nodes.clear();
}

void Autotuner::addObserver(std::unique_ptr<AutotuneObserver> O) {
  P->Observers.push_back(std::move(O));
}

llvm::Error Autotuner::Impl::checkBackend(llvm::SMLoc Loc) {
  std::string Why = Self.Bench->getSetupError();
  if (Why.empty())
    return llvm::Error::success();
  // Every rank that needed the backend failed the same way; rank 0 says so.
  if (rank() != 0)
    return llvm::make_error<ReportedError>();
  return Diags.error(Loc, Why);
}

void Autotuner::Impl::notifyProgress(size_t Done, size_t Total) {
  for (const std::unique_ptr<AutotuneObserver> &O : Observers)
    O->nodeHandled(Done, Total);
}

std::string Autotuner::Impl::cacheKey(const Graph &G,
                                      const MultiTemplateBufferNode &N) {
  return cacheKeyOf(M, G, N, Opts, Self.Bench->getBackendName(),
                    Self.Bench->getVersion(), Ranks.size());
}

namespace {

/// The length-prefixed list the cache bundle is made of.
void appendEntry(std::string &Out, llvm::StringRef E) {
  Out += std::to_string(E.size());
  Out += ':';
  Out += E;
}

std::vector<std::string> splitEntries(llvm::StringRef S) {
  std::vector<std::string> Out;
  while (!S.empty()) {
    size_t Colon = S.find(':');
    size_t Len = 0;
    if (Colon == llvm::StringRef::npos ||
        S.substr(0, Colon).getAsInteger(10, Len) || Colon + 1 + Len > S.size())
      return {};
    Out.push_back(S.substr(Colon + 1, Len).str());
    S = S.drop_front(Colon + 1 + Len);
  }
  return Out;
}

} // namespace

std::string
Autotuner::Impl::lookupBundle(const Graph &G,
                              llvm::ArrayRef<MultiTemplateBufferNode *> Todo,
                              bool Local) {
  if (!Store.getCache() || (rank() != 0 && !Local))
    return "";
  std::string Out = "B";
  for (MultiTemplateBufferNode *N : Todo) {
    std::string Warning;
    std::string Entry =
        Store.lookupEntry(cacheKey(G, *N), *N, std::nullopt, Warning);
    if (!Warning.empty())
      warn(N->getLoc(), Warning);
    appendEntry(Out, Entry);
  }
  return Out;
}

llvm::Expected<std::string> Autotuner::Impl::sync(PreSyncInput In,
                                                  std::string &Bundle) {
  In.Flags = protocolFlags(Opts, Fusion, Self.Mode);
  In.Groups = groupMembership(M);
  return Ranks.sync(std::move(In), result().Sync, Bundle);
}

void Autotuner::Impl::decideWithoutBenchmark(const Graph &G,
                                             MultiTemplateBufferNode &N,
                                             llvm::StringRef Reason,
                                             bool Fallback) {
  NodeResult R = startRecord(M, G, N);
  // A replay that got part-way may have left timings and a dispatch table.
  N.getTimings().clear();
  N.getFusedTimings().clear();
  N.getDispatch().clear();
  std::string Chosen = fallbackChoice(N, Opts);
  if (auto *C = llvm::dyn_cast<CollectiveMultiTemplateBufferNode>(&N)) {
    C->setSync(SyncState::Failed);
    C->setFallback(true);
  } else {
    // Peers cannot agree on measurements, but the noise-free cost model
    // gives every rank the same ranking.
    Workload W = describeNode(M, G, N);
    double Best = Inf;
    for (const Choice &Ch : N.getChoices()) {
      double Us = Model.choiceUs(W, Ch, false);
      if (Us < Best) {
        Best = Us;
        Chosen = Ch.Name;
      }
    }
  }
  R.Fallback = true;
  for (const Choice &Ch : N.getChoices()) {
    ChoiceResult CR;
    CR.Name = Ch.Name;
    CR.Status = ChoiceStatus::Skipped;
    CR.Us = CR.LocalUs = CR.FusedUs = Inf;
    CR.Message = Reason.str();
    R.Choices.push_back(CR);
  }
  N.setDecision(Chosen);
  N.setEpilogueFused(false);
  R.Chosen = Chosen;
  if (Fallback) {
    ++result().Sync.FallbackNodes;
    FellBack.push_back(R.Name + " -> " + Chosen);
  }
  result().Nodes.push_back(std::move(R));
}

llvm::Error Autotuner::Impl::noteFallbacks(const Graph &G,
                                           llvm::StringRef What) {
  if (FellBack.empty())
    return llvm::Error::success();
  std::string Line;
  llvm::raw_string_ostream OS(Line);
  OS << What << " of '@" << G.getName() << "' failed: " << Ranks.reason()
     << "; " << FellBack.size() << (FellBack.size() == 1 ? " node" : " nodes")
     << " could not be measured";
  bool Error = Opts.OnSyncFailure == SyncFailurePolicy::Error;
  if (Error) {
    OS << " (--on-sync-failure=error)";
  } else {
    // What was chosen instead; a long list is cut, the report has it all.
    OS << " and fell back: ";
    constexpr size_t Shown = 8;
    for (size_t I = 0; I < std::min(Shown, FellBack.size()); ++I)
      OS << (I ? ", " : "") << FellBack[I];
    if (FellBack.size() > Shown)
      OS << ", ... (" << FellBack.size() - Shown << " more)";
  }
  FellBack.clear();
  if (!Error) {
    result().Warnings.push_back(OS.str());
    return llvm::Error::success();
  }
  // Every rank stops; the lowest rank still talking says why, once.
  std::vector<int> Missing = Ranks.world().missingPeers();
  int Speaker = 0;
  while (Ranks.isBroken() && llvm::is_contained(Missing, Speaker))
    ++Speaker;
  if (rank() != Speaker)
    return llvm::make_error<ReportedError>();
  return Diags.error(G.getLoc(), OS.str());
}

void Autotuner::Impl::finalize(const Graph &G, MultiTemplateBufferNode &N,
                               bool WithFusion, const std::string *Entry) {
  Node = ChoiceMeasurer::NodeState();
  Store.beginNode();
  std::string Key;
  if (Store.getCache() && Entry) {
    // Rank 0's entry, agreed in the pre-sync: replay needs no peer.
    Key = cacheKey(G, N);
    Store.beginReplay(*Entry, Key);
  } else if (Store.getCache() && Ranks.isDegraded()) {
    // No peer to agree with: what this rank's cache holds is replayed. Ranks
    // sharing a cache directory read the same entry and decide alike; what
    // it lacks falls back below, since nothing can be measured.
    Key = cacheKey(G, N);
    std::string Warning;
    std::optional<llvm::StringRef> GroupKey;
    if (!Ranks.nodeGroupKey().empty())
      GroupKey = llvm::StringRef(Ranks.nodeGroupKey());
    Store.beginReplay(Store.lookupEntry(Key, N, GroupKey, Warning), Key);
    if (!Warning.empty())
      warn(N.getLoc(), Warning);
  } else if (Store.getCache()) {
    Key = cacheKey(G, N);
    // Rank 0's cache decides for every rank (the group's first rank for a
    // subgroup's node): "H" + entry, or "M".
    std::string Data = "M";
    if (Ranks.nodeComm().rank() == 0) {
      std::string Warning;
      Data = Store.lookupEntry(Key, N, llvm::StringRef(Ranks.nodeGroupKey()),
                               Warning);
      if (!Warning.empty())
        warn(N.getLoc(), Warning);
    }
    if (Ranks.broadcastFromLeader(
            Data, Opts.ChoiceTimeout + Opts.AgreementTimeout,
            "a peer stopped answering during the cache lookup"))
      Store.beginReplay(Data, Key);
  }
  bool WasHit = Store.isActive() && Store.hasReplay();
  unsigned Before = result().BenchmarksRun;
  finalizeNode(G, N, WithFusion);
  if (Node.Missing) {
    if (Store.isActive())
      ++result().CacheMisses;
    CacheOnlyFailed = true;
    llvm::consumeError(Diags.error(
        N.getLoc(), "no autotune cache entry for '%" + N.getName() + "' in '" +
                        Opts.CacheDir + "' (--cache-only)"));
    return;
  }
  if (!Store.isActive())
    return;
  bool Measured = result().BenchmarksRun != Before;
  if (WasHit && !Measured) {
    ++result().CacheHits;
    if (!result().Nodes.empty())
      result().Nodes.back().FromCache = true;
    return;
  }
  ++result().CacheMisses;
  if (Ranks.isDegraded() || Ranks.nodeComm().rank() != 0 || Opts.CacheOnly ||
      !Opts.Faults.empty())
    return;
  if (llvm::Error E = Store.storeNode(Key)) {
    std::string Msg = llvm::toString(std::move(E));
    if (!StoreWarned)
      warn(N.getLoc(), "cannot write the autotune cache: " + Msg);
    StoreWarned = true;
  }
}

void Autotuner::Impl::replayAlone(const Graph &G, MultiTemplateBufferNode &N,
                                  bool WithFusion, const std::string *Entry) {
  // A subgroup's records carry its members, as its leader wrote them.
  std::vector<int> Group = subgroupOf(G, N);
  if (!Group.empty())
    Ranks.replayAsGroup(Group);
  finalize(G, N, WithFusion, Entry);
  Ranks.leaveGroup();
}

bool Autotuner::Impl::stopIfUnmeasured(const Graph &G,
                                       MultiTemplateBufferNode &N) {
  if (Node.Missing)
    decideWithoutBenchmark(G, N, "not in the autotune cache (--cache-only)",
                           /*Fallback=*/false);
  else if (Node.Unmeasured)
    decideWithoutBenchmark(G, N, Ranks.reason());
  return Node.Missing || Node.Unmeasured;
}

void Autotuner::Impl::finalizeNode(const Graph &G, MultiTemplateBufferNode &N,
                                   bool WithFusion) {
  llvm::TimeTraceScope Scope("finalize", "%" + N.getName());
  Workload W = describeNode(M, G, N);
  NodeTimes T;
  T.Unfused = Measurer.measureChoices(measured(N), W, 0, false, {}, Node);
  if (stopIfUnmeasured(G, N))
    return;
  NodeResult R = startRecord(M, G, N);
  T.HasEpilogue =
      WithFusion && !N.getEpilogue().empty() && Heuristic.considersFusion();
  T.BlasEpilogue = W.BlasEpilogue;
  bool Measured = Heuristic.needsMeasuredFusedTimes();
  if (T.HasEpilogue) {
    if (Measured) {
      std::vector<bool> FailedUnfused;
      for (const AgreedMeasurement &A : T.Unfused)
        FailedUnfused.push_back(A.Status != ChoiceStatus::Ok);
      T.Fused =
          Measurer.measureChoices(measured(N), W, 0, true, FailedUnfused, Node);
      T.Epilogue = Measurer.measureEpilogue(measured(N), W, Node);
    } else {
      // The heuristic compares predictions with predictions.
      T.Predicted = true;
      std::vector<std::string> Pruned = Measurer.pruneReasons(measured(N), W);
      for (size_t I = 0; I < N.getChoices().size(); ++I) {
        const Choice &C = N.getChoices()[I];
        AgreedMeasurement A;
        // A pruned choice is never picked, not even fused.
        if (Pruned[I].empty())
          A.Us = roundUs(Model.choiceUs(W, C, true));
        A.Pruned = !Pruned[I].empty();
        A.Status =
            std::isfinite(A.Us) ? ChoiceStatus::Ok : ChoiceStatus::Skipped;
        T.Fused.push_back(A);
        T.PredictedUnfusedUs.push_back(T.Unfused[I].Status == ChoiceStatus::Ok
                                           ? Model.choiceUs(W, C, false)
                                           : Inf);
      }
      T.Epilogue.Us = roundUs(Model.epilogueUs(W));
    }
    if (stopIfUnmeasured(G, N))
      return;
  }

  FusionDecision D = decideNode(Heuristic, N, T, Fusion, Opts, R.Fallback);
  if (!R.Fallback)
    retimeGemmSustained(G, N, W, T, D);
  // Without a backend the error at the end of tuning says why, once.
  if (R.Fallback && Self.Bench->getSetupError().empty())
    warn(N.getLoc(), "every choice of '%" + N.getName() + "' failed (" +
                         whyEveryChoiceFailed(N, T.Unfused) + "); using '" +
                         D.Choice + "'");
  applyDecision(N, T, D, R);
  if (auto *CN = llvm::dyn_cast<CollectiveMultiTemplateBufferNode>(&N)) {
    CN->setSync(SyncState::Ok);
    CN->setFallback(R.Fallback);
  }

  // One winner per size hint, measured at that size: rows for a matmul,
  // message bytes for a collective (custom kernels have no size to vary). A
  // choice that failed or timed out at the node's own size is not tried
  // again: a timeout then costs one choice timeout per workload, not one per
  // hint.
  llvm::ArrayRef<int64_t> Hints;
  if (W.K == Workload::Kind::Gemm) {
    Hints = Opts.SizeHintsM;
    N.setDispatchUnit(DispatchUnit::M);
  } else if (W.K == Workload::Kind::Collective) {
    Hints = Opts.SizeHintsBytes;
    N.setDispatchUnit(DispatchUnit::Bytes);
  }
  std::vector<bool> FailedAtSize;
  for (const AgreedMeasurement &A : T.Unfused)
    FailedAtSize.push_back(A.Status != ChoiceStatus::Ok &&
                           A.Status != ChoiceStatus::Skipped);
  for (int64_t Hint : Hints) {
    Workload HW = describeNode(M, G, N, Hint);
    std::vector<AgreedMeasurement> AtHint = Measurer.measureChoices(
        measured(N), HW, Hint, false, FailedAtSize, Node);
    if (Node.Unmeasured && !Node.Missing) {
      decideWithoutBenchmark(G, N, Ranks.reason());
      return;
    }
    if (Node.Missing)
      break;
    std::string Winner =
        fastestChoice(N, AtHint, Fusion.TieTolerance, fallbackChoice(N, Opts));
    N.getDispatch().push_back({Hint, Winner});
    R.Dispatch.push_back({Hint, Winner});
  }

  R.Chosen = D.Choice;
  R.EpilogueFused = D.Fused;
  R.EpilogueUs = T.Epilogue.Us;
  R.TimedBy = timedBy(G, N);
  result().Nodes.push_back(std::move(R));
}

llvm::Error Autotuner::decideNow(Graph &G, MultiTemplateBufferNode &N) {
  Impl &I = *P;
  if (llvm::Error E = I.Ranks.applyRankFaults())
    return E;
  // N is built alone as it is measured; nothing built runs on after.
  auto Finish = llvm::make_scope_exit([&] { I.Measurer.finishBuilds(); });
  auto T0 = Clock::now();
  std::string Miss;
  if (I.Opts.DecisionsFrom) {
    Result.DecisionsFrom = I.Opts.DecisionsFrom->getPath().str();
    // Every rank reads the same file: they skip the same nodes, and their
    // syncs stay in step (a collective is never covered).
    DecisionsSource::Match Mt = I.Opts.DecisionsFrom->lookup(I.M, G, N);
    if (Mt.Miss.empty()) {
      I.decideFromTable(G, N, Mt, /*WithFusion=*/false);
      I.addPhase("dispatch", msSince(T0));
      return llvm::Error::success();
    }
    Miss = Mt.Miss;
  }
  size_t Before = Result.Nodes.size();
  auto NoteMiss = llvm::make_scope_exit([&] {
    if (!Miss.empty() && Result.Nodes.size() > Before)
      Result.Nodes.back().DispatchMiss = Miss;
  });
  auto *C = llvm::dyn_cast<CollectiveMultiTemplateBufferNode>(&N);
  // One sync per collective; the first node is preceded by one whatever its
  // kind, so ranks agree on flags before anything else crosses them.
  if (C ||
      (!I.Ranks.ranksAgreed() && !I.Ranks.isDegraded() && I.Ranks.size() > 1)) {
    PreSyncInput In;
    In.G = &G;
    if (C)
      In.Collectives.push_back(C);
    In.CompareStructure = !I.Ranks.ranksAgreed();
    if (C && I.Opts.Faults.rankFault(Fault::Kind::Mismatch, I.rank()))
      In.Collectives.clear();
    auto S0 = Clock::now();
    std::string Unused;
    llvm::Expected<std::string> Why = I.sync(std::move(In), Unused);
    Result.Sync.Ms += msSince(S0);
    I.addPhase("pre_sync", msSince(S0));
    if (!Why) {
      if (I.rank() == 0)
        return I.Diags.error(N.getLoc(), toString(Why.takeError()));
      llvm::consumeError(Why.takeError());
      return llvm::make_error<ReportedError>();
    }
    if (!Why->empty()) {
      Result.Sync.Ok = false;
      if (Result.Sync.Reason.empty())
        Result.Sync.Reason = *Why;
      // What the cache holds is replayed without peers; nothing is
      // measured. The next sync tries again: V1 syncs each collective on
      // its own.
      I.Ranks.degrade(*Why);
      if (I.Store.getCache())
        I.replayAlone(G, N, /*WithFusion=*/false);
      else
        I.decideWithoutBenchmark(G, N, *Why);
      I.Ranks.retryAfterSync(*Why);
      I.addPhase("benchmark", msSince(T0));
      if (I.CacheOnlyFailed)
        return llvm::make_error<ReportedError>();
      return I.noteFallbacks(G, "sync for '%" + N.getName() + "'");
    }
  }
  if (std::vector<int> Ranks = I.subgroupOf(G, N); !Ranks.empty())
    I.tuneSubgroupNodes(G, {I.queueGroupNode(G, N, std::move(Ranks))},
                        /*WithFusion=*/false);
  else
    I.finalize(G, N, /*WithFusion=*/false);
  I.addPhase("benchmark", msSince(T0));
  if (llvm::Error E = I.checkBackend(N.getLoc()))
    return E;
  if (I.CacheOnlyFailed)
    return llvm::make_error<ReportedError>();
  return I.noteFallbacks(G, "sync");
}

/// G's position among M's graphs.
static unsigned graphIndex(const Module &M, const Graph &G) {
  return llvm::find_if(M.getGraphs(),
                       [&](const auto &X) { return X.get() == &G; }) -
         M.getGraphs().begin();
}

/// The schedule's undecided multi-template kernels (leaders, in order) and
/// collectives: what tuneGraph decides.
static void collectUndecided(
    const Schedule &S, std::vector<MultiTemplateBufferNode *> &Todo,
    std::vector<const CollectiveMultiTemplateBufferNode *> &Collectives) {
  for (const ScheduledKernel &K : S.Kernels)
    if (auto *N = llvm::dyn_cast<MultiTemplateBufferNode>(
            const_cast<Node *>(K.getLeader())))
      if (!N->isDecided())
        Todo.push_back(N);
  for (const CollectiveMultiTemplateBufferNode *C : S.Collectives)
    if (!C->isDecided())
      Collectives.push_back(C);
}

llvm::Error Autotuner::tuneGraph(Graph &G) {
  Impl &I = *P;
  if (llvm::Error E = I.Ranks.applyRankFaults())
    return E;
  auto T0 = Clock::now();
  llvm::Expected<Schedule> S = buildSchedule(G);
  if (!S)
    return I.Diags.error(G.getLoc(), toString(S.takeError()));
  std::vector<MultiTemplateBufferNode *> Todo;
  std::vector<const CollectiveMultiTemplateBufferNode *> Collectives;
  collectUndecided(*S, Todo, Collectives);
  I.addPhase("collect", msSince(T0));

  // With a decision table, decisions are offered as this graph's.
  unsigned GraphIndex = I.Table ? graphIndex(I.M, G) : 0;
  auto Record = [&](std::unique_ptr<MultiTemplateBufferNode> SI) {
    I.StandInOf.erase(SI.get());
    I.Digest->add(GraphIndex, *SI);
    I.Table->offer(GraphIndex, std::move(SI));
  };

  // --decisions-from first: what a dispatch table covers is decided before
  // anything is looked up, synced or built, so it costs no benchmark.
  llvm::DenseMap<const MultiTemplateBufferNode *, std::string> Misses =
      I.decideFromFile(G, Todo, GraphIndex);

  // Rank 0 looks every node up in the cache first; its entries travel with
  // the pre-sync, so a node the cache holds is replayed whatever becomes of
  // the pre-sync, and a fully cached graph measures (and waits for) nothing.
  auto L0 = Clock::now();
  std::string Bundle = I.lookupBundle(G, Todo);
  if (I.Store.getCache())
    I.addPhase("cache_lookup", msSince(L0));
  bool NeedSync = !Collectives.empty() || (I.Ranks.size() > 1 && !Todo.empty());
  if (NeedSync) {
    auto S0 = Clock::now();
    PreSyncInput In;
    In.G = &G;
    In.Collectives = Collectives;
    // A rank that collected a different list: it misses the last node.
    if (I.Opts.Faults.rankFault(Fault::Kind::Mismatch, I.rank()) &&
        !In.Collectives.empty())
      In.Collectives.pop_back();
    In.Bundle = std::move(Bundle);
    Bundle.clear();
    llvm::Expected<std::string> Why = I.sync(std::move(In), Bundle);
    double Ms = msSince(S0);
    Result.Sync.Ms += Ms;
    I.addPhase("pre_sync", Ms);
    if (!Why) {
      // Every rank found the same difference; rank 0 names it.
      if (I.rank() == 0)
        return I.Diags.error(G.getLoc(), toString(Why.takeError()));
      llvm::consumeError(Why.takeError());
      return llvm::make_error<ReportedError>();
    }
    if (!Why->empty()) {
      Result.Sync.Ok = false;
      if (Result.Sync.Reason.empty())
        Result.Sync.Reason = *Why;
      // Nothing is measured from here on; what the cache holds still
      // replays, identically on every rank.
      I.Ranks.degrade(*Why);
    }
    // Rank 0's entries did not arrive (a peer is missing, or this rank is
    // the late one): replay from this rank's own reading of the cache, so a
    // fully cached graph never depends on a peer answering.
    if (I.Ranks.isDegraded() && Bundle.empty() && I.Store.getCache()) {
      auto L1 = Clock::now();
      Bundle = I.lookupBundle(G, Todo, /*Local=*/true);
      I.addPhase("cache_lookup", msSince(L1));
    }
  }
  std::vector<std::string> Entries;
  if (I.Store.getCache() && llvm::StringRef(Bundle).consume_front("B"))
    Entries = splitEntries(llvm::StringRef(Bundle).drop_front());
  bool HaveEntries = I.Store.getCache() && Entries.size() == Todo.size() &&
                     (!Bundle.empty() || Todo.empty());

  auto B0 = Clock::now();
  // Build, then run: the batch of what the walk will measure is built
  // once, before the first time is taken (the builder compiles the next
  // nodes while the runner times one). Under --split-tuning=nodes the
  // nodes measured ahead are built (with the collectives) before they are.
  const std::vector<std::string> *Known = HaveEntries ? &Entries : nullptr;
  std::vector<BuildInput> Batch = I.collectivesToBuild(G, Todo, Known);
  if (I.Opts.SplitTuning && I.Opts.SplitByNode && I.Ranks.size() > 1 &&
      !I.Ranks.isDegraded() && !I.Opts.CacheOnly)
    I.measureByNode(G, Todo, Known, Batch);
  I.planWalk(G, Todo, Known, Batch);
  I.Measurer.build(Batch);
  // Nothing the builder started runs on once the graph is decided.
  auto Finish = llvm::make_scope_exit([&] { I.Measurer.finishBuilds(); });
  std::vector<Impl::GroupNode> GroupNodes;
  // With a decision table: the stand-in of each node until it is recorded
  // (a subgroup's nodes wait for the group's exchange).
  std::vector<std::unique_ptr<MultiTemplateBufferNode>> Queued;
  for (size_t K = 0; K < Todo.size(); ++K) {
    MultiTemplateBufferNode *N = Todo[K];
    std::unique_ptr<MultiTemplateBufferNode> StandIn;
    if (I.Table) {
      StandIn.reset(
          llvm::cast<MultiTemplateBufferNode>(N->cloneStandIn().release()));
      I.StandInOf[StandIn.get()] = N;
      N = StandIn.get();
    }
    bool WasQueued = false;
    if (I.Ranks.isDegraded() && !HaveEntries)
      I.decideWithoutBenchmark(G, *N, I.Ranks.reason());
    else if (I.Ranks.isDegraded() && !I.subgroupOf(G, *N).empty())
      // The group cannot meet: replay its entry here, as every rank does.
      I.replayAlone(G, *N, /*WithFusion=*/true, &Entries[K]);
    else if (std::vector<int> Ranks = I.subgroupOf(G, *N); !Ranks.empty()) {
      GroupNodes.push_back(I.queueGroupNode(G, *N, std::move(Ranks)));
      WasQueued = true;
    } else
      I.finalize(G, *N, /*WithFusion=*/true,
                 HaveEntries ? &Entries[K] : nullptr);
    if (!WasQueued)
      I.noteMiss(Misses, *Todo[K]);
    if (StandIn && WasQueued)
      Queued.push_back(std::move(StandIn));
    else if (StandIn)
      Record(std::move(StandIn));
    // A queued node's record holds its place until the group's exchange.
    if (GroupNodes.empty())
      I.dropRecords();
    I.notifyProgress(K + 1, Todo.size());
  }
  I.tuneSubgroupNodes(G, GroupNodes, /*WithFusion=*/true);
  for (std::unique_ptr<MultiTemplateBufferNode> &SI : Queued)
    Record(std::move(SI));
  I.dropRecords();
  I.addPhase("benchmark", msSince(B0));
  if (llvm::Error E = I.checkBackend(G.getLoc()))
    return E;
  // Every node missing from the cache was named above.
  if (I.CacheOnlyFailed)
    return llvm::make_error<ReportedError>();
  // The module is not decided yet: whoever applies the table checks it.
  if (I.Table)
    return I.noteFallbacks(G, "pre-sync");
  // Whatever the heuristic decided must run: prove it before printing it.
  if (llvm::Error E = verifySchedule(G))
    return I.Diags.error(G.getLoc(), "the autotuner decided an illegal "
                                     "schedule for '@" +
                                         G.getName() +
                                         "': " + toString(std::move(E)));
  return I.noteFallbacks(G, "pre-sync");
}

double Autotuner::measureEpilogueUs(const Graph &G,
                                    const MultiTemplateBufferNode &N) {
  Impl &I = *P;
  if (N.getEpilogue().empty())
    return 0;
  Workload W = describeNode(I.M, G, N);
  if (!I.Ranks.isDegraded()) {
    // Outside a node's finalization: no cache entry is being replayed.
    I.Store.beginNode();
    ChoiceMeasurer::NodeState S;
    AgreedMeasurement A = I.Measurer.measureEpilogue(N, W, S);
    if (!I.Ranks.isDegraded())
      return A.Us;
  }
  return roundUs(I.Model.epilogueUs(W));
}

const TimePredictor &Autotuner::getTimePredictor() const { return *Model; }

const FusionHeuristic &Autotuner::getHeuristic() const { return P->Heuristic; }

double Autotuner::getTieTolerance() const { return P->Fusion.TieTolerance; }

SwiGluForm Autotuner::getSwiGluForm() const { return P->Fusion.SwiGlu; }
