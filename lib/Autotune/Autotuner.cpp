//===- Autotuner.cpp - One rank's autotuning session ----------------------===//
#include "mtsched/Autotune/Autotuner.h"
#include "mtsched/Autotune/Cache.h"
#include "mtsched/IR/Printer.h"
#include "mtsched/Passes/Diagnostics.h"
#include "mtsched/Schedule/Schedule.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/TimeProfiler.h"
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <thread>

using namespace mtsched;
using Clock = std::chrono::steady_clock;

char RankStoppedError::ID = 0;

static constexpr double Inf = std::numeric_limits<double>::infinity();

static double msSince(Clock::time_point T) {
  return std::chrono::duration<double, std::milli>(Clock::now() - T).count();
}

namespace {

/// A cross-rank outcome code; max-reducing it picks the worst status.
double statusCode(ChoiceStatus S) {
  switch (S) {
  case ChoiceStatus::Ok:
    return 0;
  case ChoiceStatus::WrongResult:
    return 1;
  case ChoiceStatus::Failed:
    return 2;
  case ChoiceStatus::Timeout:
    return 3;
  case ChoiceStatus::Skipped:
    return 4;
  }
  return 2;
}

ChoiceStatus statusFromCode(double C) {
  if (C >= 4)
    return ChoiceStatus::Skipped;
  if (C >= 3)
    return ChoiceStatus::Timeout;
  if (C >= 2)
    return ChoiceStatus::Failed;
  if (C >= 1)
    return ChoiceStatus::WrongResult;
  return ChoiceStatus::Ok;
}

/// A measurement agreed by every rank, plus this rank's own.
struct Agreed {
  ChoiceStatus Status = ChoiceStatus::Skipped;
  double Us = Inf;
  double LocalUs = Inf;
  std::string Message;
};

} // namespace

struct Autotuner::Impl {
  Impl(Autotuner &Self, const AutotuneOptions &Opts,
       const FusionOptions &Fusion, Communicator &Comm, Diagnostics &Diags,
       const Module &M, RankHooks Hooks)
      : Self(Self), Opts(Opts), Fusion(Fusion), Comm(Comm), Diags(Diags), M(M),
        Hooks(std::move(Hooks)) {
    auto H = createFusionHeuristic(Fusion.Heuristic);
    if (H)
      Heuristic = std::move(*H);
    else
      llvm::consumeError(H.takeError());
    // Injected faults change measurements on purpose: never cache them.
    // --cache-only measures nothing, so its replay is unaffected by faults
    // and it still reads the cache (it never writes).
    if (!Opts.CacheDir.empty() && (Opts.Faults.empty() || Opts.CacheOnly)) {
      Cache = std::make_unique<AutotuneCache>(Opts.CacheDir);
      Self.Result.CacheDir = Opts.CacheDir;
    }
  }

  Autotuner &Self;
  const AutotuneOptions &Opts;
  FusionOptions Fusion;
  Communicator &Comm;
  Diagnostics &Diags;
  const Module &M;
  RankHooks Hooks;
  std::unique_ptr<FusionHeuristic> Heuristic;

  /// Set once peers stopped answering or the pre-sync failed: from then on
  /// nothing is measured; a node the cache replays keeps its cached
  /// decision, every other node is decided by the fallback rules.
  bool Degraded = false;
  std::string DegradedReason;
  /// Set when a peer stopped answering: even the final gather is skipped,
  /// and measurements remembered this run are no longer trusted (a peer may
  /// have completed an exchange this rank gave up on).
  bool CommBroken = false;
  /// The node being finalized needed a measurement it could not take.
  bool NodeUnmeasured = false;
  /// The nodes that fell back since the last sync failure: "%name -> choice".
  std::vector<std::string> FellBack;
  /// A pre-sync (or V1 sync) agreed once, so later syncs of V1 know ranks
  /// agree on flags and structure.
  bool RanksAgreed = false;
  bool RankFaultsApplied = false;
  /// Measurements already agreed, by workload, choice, fusion and size.
  std::map<std::string, Agreed> Memo;
  Clock::time_point Start = Clock::now();
  bool ProgressShown = false;
  Clock::time_point LastProgress;

  /// The persistent cache; null without one. Only rank 0 reads and writes
  /// it and broadcasts what it found, so every rank replays the same.
  std::unique_ptr<AutotuneCache> Cache;
  /// For the node being finalized: whether the cache was consulted, what it
  /// held, the measurements the node used (to store), and whether a
  /// measurement was missing under --cache-only.
  bool CacheActive = false;
  CacheEntry Replay;
  CacheEntry Recording;
  bool NodeMissing = false;
  bool CacheOnlyFailed = false;
  bool StoreWarned = false;

  /// The communicator the node being finalized is timed on: Comm, or the
  /// node's process group's when that is smaller than the world; and the
  /// suffix that keeps that group's measurements apart in Memo and the cache
  /// (empty for the world).
  Communicator *NodeComm = &Comm;
  std::string NodeGroupKey;
  /// This rank's communicators of the subgroups it belongs to, by rank list.
  std::map<std::vector<int>, std::unique_ptr<Communicator>> GroupComms;
  /// A collective on a process group smaller than the world, waiting for
  /// its group to time it and for the exchange that tells the other ranks.
  struct GroupNode {
    MultiTemplateBufferNode *N;
    /// Its entry in result().Nodes, kept in decision order on every rank.
    size_t ResultIndex;
    /// World ranks, in the group's order; Ranks[0] leads.
    std::vector<int> Ranks;
  };

  RunResult &result() { return Self.Result; }
  int rank() const { return Comm.rank(); }

  void warn(llvm::SMLoc Loc, const llvm::Twine &Msg) {
    Diags.warning(Loc, "rank " + llvm::Twine(rank()) + ": " + Msg);
  }
  void addPhase(llvm::StringRef Name, double Ms) {
    result().PhasesMs[Name.str()] += Ms;
  }

  llvm::Error applyRankFaults();
  /// The pre-sync (runPreSync) with this rank's flags; records its outcome.
  /// Returns an empty string on success, else the reason; Bundle gets rank
  /// 0's cache bundle whenever the ranks met. An llvm::Error when the ranks
  /// differ in flags or graphs: tuning them together would be meaningless.
  llvm::Expected<std::string> sync(PreSyncInput In, std::string &Bundle);
  /// Rank 0: every node's cache entry, looked up before the pre-sync so a
  /// fully cached graph needs nothing measured (empty without a cache).
  std::string lookupBundle(const Graph &G,
                           llvm::ArrayRef<MultiTemplateBufferNode *> Todo);
  /// After a sync failure: the one stderr line the reporting rank prints,
  /// or the error under --on-sync-failure=error.
  llvm::Error noteFallbacks(const Graph &G, llvm::StringRef What);
  std::string fallbackChoice(const MultiTemplateBufferNode &N) const;
  /// Fallback counts N as a node that fell back after a sync failure.
  void decideWithoutBenchmark(const Graph &G, MultiTemplateBufferNode &N,
                              llvm::StringRef Reason, bool Fallback = true);
  /// Measures the choices of N (fused or not) at a size, max-reduced.
  /// Choices whose entry in Skip is set are not measured (a choice that
  /// failed unfused is not tried fused).
  std::vector<Agreed> measureChoices(const Graph &G,
                                     const MultiTemplateBufferNode &N,
                                     const Workload &W, int64_t Hint,
                                     bool Fused,
                                     const std::vector<bool> &Skip = {});
  Agreed measureEpilogue(const MultiTemplateBufferNode &N, const Workload &W);
  /// Finalizes N: cache lookup (Entry, from rank 0's bundle; without one,
  /// a broadcast from rank 0), then finalizeNode, then storing what was
  /// measured.
  void finalize(const Graph &G, MultiTemplateBufferNode &N, bool WithFusion,
                const std::string *Entry = nullptr);
  /// Benchmark (or replay), fusion decision, dispatch table.
  void finalizeNode(const Graph &G, MultiTemplateBufferNode &N,
                    bool WithFusion);
  /// Remembers a measurement N's decision used, for the cache.
  void record(const std::string &Key, const Agreed &A) {
    if (CacheActive)
      Recording.Records[Key] = {A.Status, A.Us, A.Message};
  }
  /// Looks Key up in the replayed entry: true and A set on a hit.
  bool replayed(const std::string &Key, Agreed &A);
  /// --prune-top-k: for each choice of N at W, empty if it is benchmarked,
  /// else why not.
  std::vector<std::string> pruneReasons(const MultiTemplateBufferNode &N,
                                        const Workload &W) const;
  void showProgress(size_t Done, size_t Total);

  /// The ranks of N's process group if N is a collective on a group smaller
  /// than the world; empty otherwise.
  std::vector<int> subgroupOf(const Graph &G,
                              const MultiTemplateBufferNode &N) const;
  /// The ranks whose measurements N's times come from.
  std::vector<int> timedBy(const Graph &G,
                           const MultiTemplateBufferNode &N) const;
  /// Queues N (a subgroup collective) for tuneSubgroupNodes, holding its
  /// place among the results.
  GroupNode queueGroupNode(const Graph &G, MultiTemplateBufferNode &N,
                           std::vector<int> Ranks);
  /// Each queued node is timed by its group's members only, on the group's
  /// communicator (disjoint groups at the same time); then one world-wide
  /// all-gather carries each group leader's decisions to every rank. If the
  /// exchange cannot happen, every rank falls back on every queued node.
  void tuneSubgroupNodes(const Graph &G, llvm::ArrayRef<GroupNode> Nodes,
                         bool WithFusion);
  /// The decision of a queued node as its leader sends it, and its reverse.
  llvm::json::Value groupRecord(const MultiTemplateBufferNode &N,
                                const NodeResult &R) const;
  bool applyGroupRecord(const llvm::json::Object &O, MultiTemplateBufferNode &N,
                        NodeResult &R) const;
};

Autotuner::Autotuner(const AutotuneOptions &Opts, const FusionOptions &Fusion,
                     CollectiveMode Mode, Communicator &Comm,
                     std::unique_ptr<Benchmarker> Bench, Diagnostics &Diags,
                     const Module &M, RankHooks Hooks)
    : Mode(Mode), Bench(std::move(Bench)) {
  P = std::make_unique<Impl>(*this, Opts, Fusion, Comm, Diags, M,
                             std::move(Hooks));
}

Autotuner::~Autotuner() = default;

llvm::Error Autotuner::Impl::applyRankFaults() {
  if (RankFaultsApplied)
    return llvm::Error::success();
  RankFaultsApplied = true;
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

static std::string unknownChoiceIn(const CacheEntry &E,
                                   const MultiTemplateBufferNode &N,
                                   std::optional<llvm::StringRef> GroupKey);

std::string
Autotuner::Impl::lookupBundle(const Graph &G,
                              llvm::ArrayRef<MultiTemplateBufferNode *> Todo) {
  if (!Cache || rank() != 0)
    return "";
  std::string Out = "B";
  for (MultiTemplateBufferNode *N : Todo) {
    std::string Key = cacheKeyOf(M, G, *N, Opts, Self.Bench->getBackendName(),
                                 Self.Bench->getVersion(), Comm.size());
    AutotuneCache::LookupResult L = Cache->lookup(Key);
    if (L.State == AutotuneCache::LookupState::Hit) {
      std::string Unknown = unknownChoiceIn(L.Entry, *N, std::nullopt);
      if (!Unknown.empty()) {
        L.State = AutotuneCache::LookupState::Invalid;
        L.Problem = "it has a record for '" + Unknown +
                    "', which is not a choice of '%" + N->getName() + "'";
      }
    }
    if (L.State == AutotuneCache::LookupState::Invalid)
      warn(N->getLoc(), "ignoring autotune cache entry '" +
                            Cache->pathFor(Key) + "' of '%" + N->getName() +
                            "': " + L.Problem + "; it will be rewritten");
    appendEntry(Out, L.State == AutotuneCache::LookupState::Hit
                         ? "H" + L.Entry.serialize(Key)
                         : std::string("M"));
  }
  return Out;
}

llvm::Expected<std::string> Autotuner::Impl::sync(PreSyncInput In,
                                                  std::string &Bundle) {
  llvm::TimeTraceScope Scope("pre-sync");
  if (Degraded)
    return DegradedReason;
  SyncResult &SR = result().Sync;
  bool First = SR.Count++ == 0;
  if (First)
    SR.DeadlineMs = double(Opts.PreSyncTimeout.count());
  In.Flags = protocolFlags(Opts, Fusion, Self.Mode);
  llvm::Expected<PreSyncOutcome> O = runPreSync(Comm, Opts, std::move(In));
  if (!O)
    return O.takeError();
  if (First) {
    SR.SkewMs = O->SkewMs;
    SR.CostMs = O->CostMs;
    SR.LateRanks = O->LateRanks;
    SR.MissingRanks = O->MissingRanks;
  }
  Bundle = std::move(O->Bundle);
  if (O->State == PreSyncOutcome::Broken) {
    Degraded = CommBroken = true;
    DegradedReason = O->Reason;
  } else {
    RanksAgreed = true;
  }
  return O->Reason;
}

std::string
Autotuner::Impl::fallbackChoice(const MultiTemplateBufferNode &N) const {
  if (llvm::isa<CollectiveMultiTemplateBufferNode>(N) &&
      !Opts.CollectiveFallback.empty() && N.findChoice(Opts.CollectiveFallback))
    return Opts.CollectiveFallback;
  return N.getChoices().front().Name;
}

static NodeResult startRecord(const Graph &G,
                              const MultiTemplateBufferNode &N) {
  NodeResult R;
  R.Graph = G.getName();
  R.Name = "%" + N.getName();
  R.Kind = N.getKindKeyword().str();
  R.Op = N.getOpName().str();
  if (const auto *C = llvm::dyn_cast<CollectiveMultiTemplateBufferNode>(&N))
    R.Group = C->getGroup();
  for (const Operand &E : N.getEpilogue())
    R.Epilogue.push_back("%" + E.V->getName());
  return R;
}

void Autotuner::Impl::decideWithoutBenchmark(const Graph &G,
                                             MultiTemplateBufferNode &N,
                                             llvm::StringRef Reason,
                                             bool Fallback) {
  NodeResult R = startRecord(G, N);
  // A replay that got part-way may have left timings and a dispatch table.
  N.getTimings().clear();
  N.getFusedTimings().clear();
  N.getDispatch().clear();
  std::string Chosen = fallbackChoice(N);
  if (auto *C = llvm::dyn_cast<CollectiveMultiTemplateBufferNode>(&N)) {
    C->setSync(SyncState::Failed);
    C->setFallback(true);
    R.Fallback = true;
  } else {
    // Peers cannot agree on measurements, but the noise-free cost model
    // gives every rank the same ranking.
    Workload W = describeNode(M, G, N);
    double Best = Inf;
    for (const Choice &Ch : N.getChoices()) {
      double Us = predictChoiceUs(Opts.Device, W, Ch, false);
      if (Us < Best) {
        Best = Us;
        Chosen = Ch.Name;
      }
    }
    R.Fallback = true;
  }
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
  OS << What << " of '@" << G.getName() << "' failed: " << DegradedReason
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
  std::vector<int> Missing = Comm.missingPeers();
  int Speaker = 0;
  while (CommBroken && llvm::is_contained(Missing, Speaker))
    ++Speaker;
  if (rank() != Speaker)
    return llvm::make_error<ReportedError>();
  return Diags.error(G.getLoc(), OS.str());
}

/// Times kept to the nanosecond: finer digits are noise and clutter the IR.
static double roundUs(double Us) {
  return std::isfinite(Us) ? std::round(Us * 1000.0) / 1000.0 : Us;
}

/// The part of a measurement's key that depends on the workload only; it is
/// computed once per node and shared by all its choices.
static std::string workloadKey(const Workload &W, bool Fused) {
  std::string S;
  llvm::raw_string_ostream OS(S);
  OS << int(W.K) << ':' << W.Gemm.Batch << 'x' << W.Gemm.M << 'x' << W.Gemm.N
     << 'x' << W.Gemm.K << ':' << int(W.Gemm.Dtype) << ':' << int(W.Collective)
     << ':' << W.Bytes << ':' << W.Ranks << ':' << W.InBytes << ':'
     << W.OutBytes;
  if (W.K == Workload::Kind::Attention)
    OS << ":attn:" << W.Attn.B << 'x' << W.Attn.Hq << 'x' << W.Attn.Hkv << 'x'
       << W.Attn.Sq << 'x' << W.Attn.Skv << 'x' << W.Attn.D << ':'
       << W.Attn.Causal << ':' << llvm::format("%a", W.Attn.Scale) << ':'
       << int(W.Attn.Dtype);
  if (Fused)
    OS << ":fused:" << W.Epilogue.NumOps << ':' << W.Epilogue.Elements << ':'
       << W.Epilogue.ExtraInputBytes << ':' << W.Epilogue.FlopsPerElement << ':'
       << W.Epilogue.RowReduction << ':' << W.Epilogue.ExtraWrites;
  return OS.str();
}

/// The key under which a measurement of C is remembered and reused.
static std::string choiceKey(const std::string &WorkloadKey, const Choice &C) {
  std::string S;
  S.reserve(WorkloadKey.size() + C.Name.size() + 2);
  S += WorkloadKey;
  S += '|';
  S += C.Name;
  if (!C.Params.empty()) {
    llvm::raw_string_ostream OS(S);
    C.Params.print(OS);
  }
  return S;
}

/// The choice of a record of E (what choiceKey appended after the '|')
/// that is neither a choice of N nor the epilogue, or "" if there is none.
/// An entry with a valid checksum can still have been written by hand; a
/// record for an unknown choice would be replayed into the report and the
/// entry rewritten with it.
/// GroupKey is the node's subgroup key, or std::nullopt where it is not
/// known yet (the lookup before the pre-sync), which accepts any.
static std::string unknownChoiceIn(const CacheEntry &E,
                                   const MultiTemplateBufferNode &N,
                                   std::optional<llvm::StringRef> GroupKey) {
  llvm::StringSet<> Known;
  // The epilogue's key ends in the group key (measureEpilogue).
  Known.insert(("<epilogue>" + GroupKey.value_or("")).str());
  for (const Choice &C : N.getChoices())
    Known.insert(llvm::StringRef(choiceKey("", C)).drop_front());
  for (const auto &KV : E.Records) {
    size_t Bar = KV.first.find('|');
    llvm::StringRef Name = Bar == std::string::npos
                               ? llvm::StringRef()
                               : llvm::StringRef(KV.first).substr(Bar + 1);
    if (!GroupKey && Name.starts_with("<epilogue>@"))
      continue;
    if (!Known.count(Name))
      return Name.empty() ? KV.first : Name.str();
  }
  return "";
}

static std::string memoKey(const Workload &W, const Choice &C, bool Fused) {
  return choiceKey(workloadKey(W, Fused), C);
}

std::vector<Agreed> Autotuner::Impl::measureChoices(
    const Graph &G, const MultiTemplateBufferNode &N, const Workload &W,
    int64_t Hint, bool Fused, const std::vector<bool> &Skip) {
  bool Collective = llvm::isa<CollectiveMultiTemplateBufferNode>(N);
  std::vector<Agreed> Out(N.getChoices().size());
  const std::string Prefix = workloadKey(W, Fused) + NodeGroupKey;
  // Local results still to be max-reduced: after every choice for a
  // collective (all ranks run it together), once per node otherwise.
  std::vector<size_t> Pending;
  std::vector<double> PendingValues;
  auto Flush = [&] {
    if (Pending.empty())
      return;
    // Each rank measured the same choices, each within the choice timeout:
    // waiting that long per choice plus a margin means a choice that timed
    // out on one rank arrives here as a timeout (+inf on every rank), never
    // as a silent peer.
    auto Bound =
        Opts.ChoiceTimeout * int64_t(Pending.size()) + Opts.AgreementTimeout;
    if (NodeComm->allReduceMax(PendingValues, Bound) != CommStatus::Ok) {
      Degraded = CommBroken = NodeUnmeasured = true;
      std::vector<int> Missing = NodeComm->missingPeers();
      DegradedReason =
          (Missing.empty() ? std::string("a peer") : formatRanks(Missing)) +
          " stopped answering during benchmarking";
      for (size_t J : Pending)
        Out[J].Status = ChoiceStatus::Skipped;
    } else {
      for (size_t K = 0; K < Pending.size(); ++K) {
        Agreed &A = Out[Pending[K]];
        ChoiceStatus S = statusFromCode(PendingValues[2 * K + 1]);
        if (S != ChoiceStatus::Ok && A.Status == ChoiceStatus::Ok)
          A.Message = "failed on another rank";
        A.Status = S;
        A.Us = S == ChoiceStatus::Ok ? roundUs(PendingValues[2 * K]) : Inf;
        std::string Key = choiceKey(Prefix, N.getChoices()[Pending[K]]);
        Memo[Key] = A;
        record(Key, A);
      }
    }
    Pending.clear();
    PendingValues.clear();
  };
  std::vector<std::string> Pruned = pruneReasons(N, W);
  for (size_t I = 0; I < N.getChoices().size(); ++I) {
    const Choice &C = N.getChoices()[I];
    if (Fused && C.isExtern()) {
      Out[I].Message = "extern choices cannot fuse";
      continue;
    }
    if (!Pruned[I].empty()) {
      Out[I].Message = Pruned[I];
      continue;
    }
    if (I < Skip.size() && Skip[I]) {
      Out[I].Message = "not tried fused: it failed unfused";
      continue;
    }
    std::string Key = choiceKey(Prefix, C);
    auto Hit = CommBroken ? Memo.end() : Memo.find(Key);
    if (Hit != Memo.end()) {
      ++result().MemoHits;
      Out[I] = Hit->second;
      record(Key, Out[I]);
      continue;
    }
    if (replayed(Key, Out[I]))
      continue;
    if (NodeMissing)
      continue;
    if (Degraded) {
      NodeUnmeasured = true;
      continue;
    }
    if (Opts.CacheOnly) {
      // Whatever the cache's state, --cache-only never benchmarks.
      NodeMissing = true;
      Out[I].Message = "not in the autotune cache (--cache-only)";
      continue;
    }
    if (Collective && NodeComm->barrier(Opts.ChoiceTimeout) != CommStatus::Ok) {
      Degraded = CommBroken = NodeUnmeasured = true;
      DegradedReason = "a peer stopped answering during benchmarking";
      continue;
    }
    Measurement Local;
    {
      llvm::TimeTraceScope Scope("benchmark", [&] {
        return "%" + N.getName() + " " + C.Name + (Fused ? " fused" : "") +
               (Hint ? " @" + std::to_string(Hint) : "");
      });
      Local = Self.Bench->measure(N, W, C, Fused);
    }
    ++result().BenchmarksRun;
    Out[I].LocalUs = Local.Status == ChoiceStatus::Ok ? Local.Us : Inf;
    Out[I].Message = Local.Message;
    Out[I].Status = Local.Status;
    Pending.push_back(I);
    PendingValues.push_back(Out[I].LocalUs);
    PendingValues.push_back(statusCode(Local.Status));
    if (Collective)
      Flush();
  }
  if (!Degraded)
    Flush();
  return Out;
}

Agreed Autotuner::Impl::measureEpilogue(const MultiTemplateBufferNode &N,
                                        const Workload &W) {
  Agreed A;
  Choice Epi{"<epilogue>", {}, {}};
  std::string Key = memoKey(W, Epi, /*Fused=*/true) + NodeGroupKey;
  auto Hit = CommBroken ? Memo.end() : Memo.find(Key);
  if (Hit != Memo.end()) {
    ++result().MemoHits;
    record(Key, Hit->second);
    return Hit->second;
  }
  if (replayed(Key, A))
    return A;
  if (NodeMissing)
    return A;
  if (Degraded) {
    NodeUnmeasured = true;
    return A;
  }
  if (Opts.CacheOnly) {
    NodeMissing = true;
    return A;
  }
  Measurement Local = Self.Bench->measureEpilogue(N, W);
  ++result().BenchmarksRun;
  std::vector<double> V{Local.Status == ChoiceStatus::Ok ? Local.Us : Inf};
  if (NodeComm->allReduceMax(V, Opts.ChoiceTimeout + Opts.AgreementTimeout) !=
      CommStatus::Ok) {
    Degraded = CommBroken = NodeUnmeasured = true;
    DegradedReason = "a peer stopped answering during benchmarking";
    return A;
  }
  A.Status = std::isfinite(V[0]) ? ChoiceStatus::Ok : ChoiceStatus::Failed;
  A.Us = roundUs(V[0]);
  A.LocalUs = Local.Us;
  Memo[Key] = A;
  record(Key, A);
  return A;
}

bool Autotuner::Impl::replayed(const std::string &Key, Agreed &A) {
  if (!CacheActive)
    return false;
  auto R = Replay.Records.find(Key);
  if (R == Replay.Records.end()) {
    // Nothing to replay and nothing may be measured.
    if (Opts.CacheOnly) {
      NodeMissing = true;
      A.Message = "not in the autotune cache (--cache-only)";
    }
    return false;
  }
  A.Status = R->second.Status;
  A.Us = R->second.Us;
  // Replayed: no rank measured anything this run.
  A.LocalUs = Inf;
  A.Message = R->second.Message;
  Memo[Key] = A;
  record(Key, A);
  return true;
}

std::vector<std::string>
Autotuner::Impl::pruneReasons(const MultiTemplateBufferNode &N,
                              const Workload &W) const {
  size_t Count = N.getChoices().size();
  std::vector<std::string> Out(Count);
  if (Opts.PruneTopK == 0 || Opts.PruneTopK >= Count)
    return Out;
  std::vector<std::pair<double, size_t>> Ranked;
  for (size_t I = 0; I < Count; ++I)
    Ranked.push_back(
        {predictChoiceUs(Opts.Device, W, N.getChoices()[I], false), I});
  // Ties (and +inf) keep program order.
  llvm::sort(Ranked);
  for (size_t R = Opts.PruneTopK; R < Count; ++R) {
    std::string Msg;
    llvm::raw_string_ostream OS(Msg);
    OS << "pruned: the cost model ranks it " << R + 1 << " of " << Count;
    if (std::isfinite(Ranked[R].first))
      OS << " (predicted " << llvm::format("%.3f", Ranked[R].first) << " us)";
    OS << "; --prune-top-k=" << Opts.PruneTopK;
    Out[Ranked[R].second] = OS.str();
  }
  return Out;
}

void Autotuner::Impl::finalize(const Graph &G, MultiTemplateBufferNode &N,
                               bool WithFusion, const std::string *Entry) {
  CacheActive = NodeMissing = NodeUnmeasured = false;
  Replay = CacheEntry();
  Recording = CacheEntry();
  std::string Key;
  if (Cache && Entry) {
    // Rank 0's entry, agreed in the pre-sync: replay needs no peer.
    Key = cacheKeyOf(M, G, N, Opts, Self.Bench->getBackendName(),
                     Self.Bench->getVersion(), Comm.size());
    CacheActive = true;
    if (llvm::StringRef(*Entry).consume_front("H")) {
      llvm::Expected<CacheEntry> E =
          CacheEntry::parse(llvm::StringRef(*Entry).drop_front(), Key);
      if (E)
        Replay = std::move(*E);
      else
        llvm::consumeError(E.takeError());
    }
  } else if (Cache && !Degraded) {
    Key = cacheKeyOf(M, G, N, Opts, Self.Bench->getBackendName(),
                     Self.Bench->getVersion(), Comm.size());
    // Rank 0's cache decides for every rank (the group's first rank for a
    // subgroup's node): "H" + entry, or "M".
    std::string Data = "M";
    if (NodeComm->rank() == 0) {
      AutotuneCache::LookupResult L = Cache->lookup(Key);
      if (L.State == AutotuneCache::LookupState::Hit) {
        std::string Unknown = unknownChoiceIn(L.Entry, N, NodeGroupKey);
        if (!Unknown.empty()) {
          L.State = AutotuneCache::LookupState::Invalid;
          L.Problem = "it has a record for '" + Unknown +
                      "', which is not a choice of '%" + N.getName() + "'";
        }
      }
      if (L.State == AutotuneCache::LookupState::Invalid)
        warn(N.getLoc(), "ignoring autotune cache entry '" +
                             Cache->pathFor(Key) + "' of '%" + N.getName() +
                             "': " + L.Problem + "; it will be rewritten");
      if (L.State == AutotuneCache::LookupState::Hit)
        Data = "H" + L.Entry.serialize(Key);
    }
    if (NodeComm->broadcast(Data, 0,
                            Opts.ChoiceTimeout + Opts.AgreementTimeout) !=
        CommStatus::Ok) {
      Degraded = CommBroken = true;
      DegradedReason = "a peer stopped answering during the cache lookup";
    } else {
      CacheActive = true;
      if (llvm::StringRef(Data).starts_with("H")) {
        // Rank 0 parsed these very bytes, so every rank parses them alike.
        llvm::Expected<CacheEntry> E =
            CacheEntry::parse(llvm::StringRef(Data).drop_front(), Key);
        if (E)
          Replay = std::move(*E);
        else
          llvm::consumeError(E.takeError());
      }
    }
  }
  bool WasHit = CacheActive && !Replay.Records.empty();
  unsigned Before = result().BenchmarksRun;
  finalizeNode(G, N, WithFusion);
  if (NodeMissing) {
    if (CacheActive)
      ++result().CacheMisses;
    CacheOnlyFailed = true;
    llvm::consumeError(Diags.error(
        N.getLoc(), "no autotune cache entry for '%" + N.getName() + "' in '" +
                        Opts.CacheDir + "' (--cache-only)"));
    return;
  }
  if (!CacheActive)
    return;
  bool Measured = result().BenchmarksRun != Before;
  if (WasHit && !Measured) {
    ++result().CacheHits;
    if (!result().Nodes.empty())
      result().Nodes.back().FromCache = true;
    return;
  }
  ++result().CacheMisses;
  if (Degraded || NodeComm->rank() != 0 || Opts.CacheOnly)
    return;
  // Keep what the entry held (other heuristics' or hints' measurements).
  for (auto &KV : Recording.Records)
    Replay.Records[KV.first] = KV.second;
  if (llvm::Error E = Cache->store(Key, Replay)) {
    std::string Msg = llvm::toString(std::move(E));
    if (!StoreWarned)
      warn(N.getLoc(), "cannot write the autotune cache: " + Msg);
    StoreWarned = true;
  }
}

void Autotuner::Impl::finalizeNode(const Graph &G, MultiTemplateBufferNode &N,
                                   bool WithFusion) {
  llvm::TimeTraceScope Scope("finalize", "%" + N.getName());
  Workload W = describeNode(M, G, N);
  std::vector<Agreed> Unfused = measureChoices(G, N, W, 0, false);
  if (NodeMissing) {
    decideWithoutBenchmark(G, N, "not in the autotune cache (--cache-only)",
                           /*Fallback=*/false);
    return;
  }
  if (NodeUnmeasured) {
    decideWithoutBenchmark(G, N, DegradedReason);
    return;
  }
  NodeResult R = startRecord(G, N);
  bool HasEpilogue =
      WithFusion && !N.getEpilogue().empty() && Heuristic->considersFusion();
  bool Measured = Heuristic->needsMeasuredFusedTimes();
  std::vector<Agreed> Fused;
  Agreed Epilogue;
  if (HasEpilogue) {
    if (Measured) {
      std::vector<bool> FailedUnfused;
      for (const Agreed &A : Unfused)
        FailedUnfused.push_back(A.Status != ChoiceStatus::Ok);
      Fused = measureChoices(G, N, W, 0, true, FailedUnfused);
      Epilogue = measureEpilogue(N, W);
    } else {
      std::vector<std::string> Pruned = pruneReasons(N, W);
      for (size_t I = 0; I < N.getChoices().size(); ++I) {
        Agreed A;
        // A pruned choice is never picked, not even fused.
        if (Pruned[I].empty())
          A.Us =
              roundUs(predictChoiceUs(Opts.Device, W, N.getChoices()[I], true));
        A.Status =
            std::isfinite(A.Us) ? ChoiceStatus::Ok : ChoiceStatus::Skipped;
        Fused.push_back(A);
      }
      Epilogue.Us = roundUs(predictEpilogueUs(Opts.Device, W));
    }
    if (NodeMissing) {
      decideWithoutBenchmark(G, N, "not in the autotune cache (--cache-only)",
                             /*Fallback=*/false);
      return;
    }
    if (NodeUnmeasured) {
      decideWithoutBenchmark(G, N, DegradedReason);
      return;
    }
  }

  FusionQuery Q;
  Q.SpeedupThreshold = Fusion.SpeedupThreshold;
  Q.EpilogueUs = Epilogue.Us;
  Q.Variants.reserve(N.getChoices().size());
  for (size_t I = 0; I < N.getChoices().size(); ++I) {
    const Choice &C = N.getChoices()[I];
    double UnfusedUs = Unfused[I].Us;
    // The cost-model heuristic compares predictions on both sides.
    if (HasEpilogue && !Measured)
      UnfusedUs = Unfused[I].Status == ChoiceStatus::Ok
                      ? predictChoiceUs(Opts.Device, W, C, false)
                      : Inf;
    Q.Variants.push_back({C.Name, UnfusedUs, HasEpilogue ? Fused[I].Us : Inf});
  }
  FusionDecision D = Heuristic->decide(Q);
  if (!D.Fused) {
    // The measured winner, whatever the heuristic's inputs were.
    double Best = Inf;
    for (size_t I = 0; I < Unfused.size(); ++I)
      if (Unfused[I].Us < Best) {
        Best = Unfused[I].Us;
        D.Choice = N.getChoices()[I].Name;
      }
  }
  bool AnyUsable = D.Fused;
  for (const Agreed &A : Unfused)
    AnyUsable |= std::isfinite(A.Us);
  if (!AnyUsable) {
    D.Choice = fallbackChoice(N);
    R.Fallback = true;
    warn(N.getLoc(), "every choice of '%" + N.getName() + "' failed; using '" +
                         D.Choice + "'");
  }

  N.setDecision(D.Choice);
  N.setEpilogueFused(D.Fused);
  size_t Count = N.getChoices().size();
  N.getTimings().clear();
  N.getTimings().reserve(Count);
  N.getFusedTimings().clear();
  if (HasEpilogue)
    N.getFusedTimings().reserve(Count);
  R.Choices.reserve(Count);
  for (size_t I = 0; I < Count; ++I) {
    const Choice &C = N.getChoices()[I];
    N.getTimings().push_back({C.Name, Unfused[I].Us});
    ChoiceResult CR;
    CR.Name = C.Name;
    CR.Status = Unfused[I].Status;
    CR.Us = Unfused[I].Us;
    CR.LocalUs = Unfused[I].LocalUs;
    CR.FusedUs = Inf;
    CR.Message = Unfused[I].Message;
    if (HasEpilogue && !C.isExtern()) {
      N.getFusedTimings().push_back({C.Name, Fused[I].Us});
      CR.FusedUs = Fused[I].Us;
      CR.FusedPredicted = !Measured;
    }
    R.Choices.push_back(CR);
  }
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
  for (const Agreed &A : Unfused)
    FailedAtSize.push_back(A.Status != ChoiceStatus::Ok &&
                           A.Status != ChoiceStatus::Skipped);
  for (int64_t Hint : Hints) {
    Workload HW = describeNode(M, G, N, Hint);
    std::vector<Agreed> AtHint =
        measureChoices(G, N, HW, Hint, false, FailedAtSize);
    if (NodeUnmeasured && !NodeMissing) {
      decideWithoutBenchmark(G, N, DegradedReason);
      return;
    }
    if (NodeMissing)
      break;
    double Best = Inf;
    std::string Winner = fallbackChoice(N);
    for (size_t I = 0; I < AtHint.size(); ++I)
      if (AtHint[I].Us < Best) {
        Best = AtHint[I].Us;
        Winner = N.getChoices()[I].Name;
      }
    N.getDispatch().push_back({Hint, Winner});
    R.Dispatch.push_back({Hint, Winner});
  }

  R.Chosen = D.Choice;
  R.EpilogueFused = D.Fused;
  R.EpilogueUs = Epilogue.Us;
  R.TimedBy = timedBy(G, N);
  result().Nodes.push_back(std::move(R));
}

void Autotuner::Impl::showProgress(size_t Done, size_t Total) {
  if (!Opts.Progress || rank() != 0 || !llvm::errs().is_displayed())
    return;
  if (msSince(Start) < 1000 && !ProgressShown)
    return;
  // At most ten redraws a second (and always the last): redrawing per node
  // wrote megabytes to the terminal on large graphs.
  if (Done != Total && ProgressShown && msSince(LastProgress) < 100)
    return;
  ProgressShown = true;
  LastProgress = Clock::now();
  llvm::errs() << "\r[mtsched] autotuning " << Done << "/" << Total << " nodes";
  if (Done == Total)
    llvm::errs() << '\n';
  llvm::errs().flush();
}

//===----------------------------------------------------------------------===//
// Collectives on process groups smaller than the world
//===----------------------------------------------------------------------===//

std::vector<int>
Autotuner::Impl::subgroupOf(const Graph &G,
                            const MultiTemplateBufferNode &N) const {
  const auto *C = llvm::dyn_cast<CollectiveMultiTemplateBufferNode>(&N);
  if (!C)
    return {};
  std::vector<int64_t> Ranks = M.groupRanks(C->getGroup(), G.getWorldSize());
  // The verifier keeps ranks below the world size: a group as large as the
  // world is the world, in any order.
  if (Ranks.empty() || int64_t(Ranks.size()) >= Comm.size())
    return {};
  return std::vector<int>(Ranks.begin(), Ranks.end());
}

std::vector<int>
Autotuner::Impl::timedBy(const Graph &G,
                         const MultiTemplateBufferNode &N) const {
  std::vector<int> Ranks = subgroupOf(G, N);
  if (Ranks.empty())
    for (int R = 0; R < Comm.size(); ++R)
      Ranks.push_back(R);
  return Ranks;
}

Autotuner::Impl::GroupNode
Autotuner::Impl::queueGroupNode(const Graph &G, MultiTemplateBufferNode &N,
                                std::vector<int> Ranks) {
  result().Nodes.push_back(startRecord(G, N));
  return {&N, result().Nodes.size() - 1, std::move(Ranks)};
}

static llvm::json::Value jsonUs(double Us) {
  return std::isfinite(Us) ? llvm::json::Value(Us) : llvm::json::Value(nullptr);
}

static double usOf(const llvm::json::Value *V) {
  std::optional<double> D = V ? V->getAsNumber() : std::nullopt;
  return D ? *D : Inf;
}

static llvm::json::Array jsonTimings(llvm::ArrayRef<ChoiceTiming> T) {
  llvm::json::Array A;
  for (const ChoiceTiming &E : T)
    A.push_back(llvm::json::Array{E.Choice, jsonUs(E.Us)});
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
    Out.push_back({(*P)[0].getAsString()->str(), usOf(&(*P)[1])});
  }
  return true;
}

llvm::json::Value Autotuner::Impl::groupRecord(const MultiTemplateBufferNode &N,
                                               const NodeResult &R) const {
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
                           {"message", CR.Message}});
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

bool Autotuner::Impl::applyGroupRecord(const llvm::json::Object &O,
                                       MultiTemplateBufferNode &N,
                                       NodeResult &R) const {
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
    if (Degraded)
      break;
    if (!llvm::is_contained(GN.Ranks, rank()))
      continue;
    auto It = GroupComms.find(GN.Ranks);
    if (It == GroupComms.end()) {
      llvm::Expected<std::unique_ptr<Communicator>> Sub =
          Comm.createSubgroup(GN.Ranks);
      if (!Sub) {
        Degraded = CommBroken = true;
        DegradedReason = llvm::toString(Sub.takeError());
        break;
      }
      It = GroupComms.emplace(GN.Ranks, std::move(*Sub)).first;
    }
    // Members meet first with the phase's bound, so one still busy with
    // another group's node is waited for; later steps are prompt.
    if (It->second->barrier(PhaseBound) != CommStatus::Ok) {
      Degraded = CommBroken = true;
      DegradedReason = "a peer stopped answering during benchmarking";
      break;
    }
    NodeComm = It->second.get();
    NodeGroupKey =
        "@" + llvm::join(llvm::map_range(
                             GN.Ranks, [](int R) { return std::to_string(R); }),
                         ",");
    finalize(G, *GN.N, WithFusion);
    NodeComm = &Comm;
    NodeGroupKey.clear();
    // finalize appended the node's result: it takes the queued place.
    result().Nodes[GN.ResultIndex] = std::move(result().Nodes.back());
    result().Nodes.pop_back();
  }

  // Each group's first rank sends its group's decisions; one all-gather
  // over the world carries them to the ranks outside the group. A rank
  // that is degraded (its pre-sync failed, or a peer stopped answering)
  // takes no part, and then nobody's exchange succeeds.
  bool Exchanged = false;
  if (!Degraded) {
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
    CommStatus S = Comm.allGather(OS.str(), All, PhaseBound);
    if (S != CommStatus::Ok) {
      Degraded = CommBroken = true;
      DegradedReason =
          "a peer stopped answering while the groups' decisions were shared";
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
                DegradedReason + "); they fall back to their default choice");
  for (const GroupNode &GN : Nodes) {
    GN.N->getTimings().clear();
    GN.N->getFusedTimings().clear();
    GN.N->getDispatch().clear();
    decideWithoutBenchmark(G, *GN.N, DegradedReason);
    result().Nodes[GN.ResultIndex] = std::move(result().Nodes.back());
    result().Nodes.pop_back();
  }
}

llvm::Error Autotuner::decideNow(Graph &G, MultiTemplateBufferNode &N) {
  Impl &I = *P;
  if (llvm::Error E = I.applyRankFaults())
    return E;
  auto T0 = Clock::now();
  auto *C = llvm::dyn_cast<CollectiveMultiTemplateBufferNode>(&N);
  // One sync per collective; the first node is preceded by one whatever its
  // kind, so ranks agree on flags before anything else crosses them.
  if (C || (!I.RanksAgreed && !I.Degraded && I.Comm.size() > 1)) {
    PreSyncInput In;
    In.G = &G;
    if (C)
      In.Collectives.push_back(C);
    In.CompareStructure = !I.RanksAgreed;
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
      // The next sync tries again: V1 syncs each collective on its own.
      I.Degraded = I.CommBroken;
      I.DegradedReason = *Why;
      I.decideWithoutBenchmark(G, N, *Why);
      I.addPhase("benchmark", msSince(T0));
      return I.noteFallbacks(G, "sync for '%" + N.getName() + "'");
    }
  }
  if (std::vector<int> Ranks = I.subgroupOf(G, N); !Ranks.empty())
    I.tuneSubgroupNodes(G, {I.queueGroupNode(G, N, std::move(Ranks))},
                        /*WithFusion=*/false);
  else
    I.finalize(G, N, /*WithFusion=*/false);
  I.addPhase("benchmark", msSince(T0));
  if (I.CacheOnlyFailed)
    return llvm::make_error<ReportedError>();
  return I.noteFallbacks(G, "sync");
}

llvm::Error Autotuner::tuneGraph(Graph &G) {
  Impl &I = *P;
  if (llvm::Error E = I.applyRankFaults())
    return E;
  auto T0 = Clock::now();
  llvm::Expected<Schedule> S = buildSchedule(G);
  if (!S)
    return I.Diags.error(G.getLoc(), toString(S.takeError()));
  std::vector<MultiTemplateBufferNode *> Todo;
  for (const ScheduledKernel &K : S->Kernels)
    if (auto *N = llvm::dyn_cast<MultiTemplateBufferNode>(
            const_cast<Node *>(K.getLeader())))
      if (!N->isDecided())
        Todo.push_back(N);
  std::vector<const CollectiveMultiTemplateBufferNode *> Collectives;
  for (const CollectiveMultiTemplateBufferNode *C : S->Collectives)
    if (!C->isDecided())
      Collectives.push_back(C);
  I.addPhase("collect", msSince(T0));

  // Rank 0 looks every node up in the cache first; its entries travel with
  // the pre-sync, so a node the cache holds is replayed whatever becomes of
  // the pre-sync, and a fully cached graph measures (and waits for) nothing.
  auto L0 = Clock::now();
  std::string Bundle = I.lookupBundle(G, Todo);
  if (I.Cache)
    I.addPhase("cache_lookup", msSince(L0));
  bool NeedSync = !Collectives.empty() || (I.Comm.size() > 1 && !Todo.empty());
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
      I.Degraded = true;
      I.DegradedReason = *Why;
    }
  }
  std::vector<std::string> Entries;
  if (I.Cache && llvm::StringRef(Bundle).consume_front("B"))
    Entries = splitEntries(llvm::StringRef(Bundle).drop_front());
  bool HaveEntries = I.Cache && Entries.size() == Todo.size() &&
                     (!Bundle.empty() || Todo.empty());

  auto B0 = Clock::now();
  std::vector<Impl::GroupNode> GroupNodes;
  for (size_t K = 0; K < Todo.size(); ++K) {
    if (I.Degraded && !HaveEntries)
      I.decideWithoutBenchmark(G, *Todo[K], I.DegradedReason);
    else if (std::vector<int> Ranks = I.subgroupOf(G, *Todo[K]); !Ranks.empty())
      GroupNodes.push_back(I.queueGroupNode(G, *Todo[K], std::move(Ranks)));
    else
      I.finalize(G, *Todo[K], /*WithFusion=*/true,
                 HaveEntries ? &Entries[K] : nullptr);
    I.showProgress(K + 1, Todo.size());
  }
  I.tuneSubgroupNodes(G, GroupNodes, /*WithFusion=*/true);
  I.addPhase("benchmark", msSince(B0));
  // Every node missing from the cache was named above.
  if (I.CacheOnlyFailed)
    return llvm::make_error<ReportedError>();
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
  if (!I.Degraded) {
    // Outside a node's finalization: no cache entry is being replayed.
    I.CacheActive = I.NodeMissing = false;
    Agreed A = I.measureEpilogue(N, W);
    if (!I.Degraded)
      return A.Us;
  }
  return roundUs(predictEpilogueUs(I.Opts.Device, W));
}

const DeviceDesc &Autotuner::getDevice() const { return P->Opts.Device; }

void Autotuner::finish() {
  Impl &I = *P;
  auto T0 = Clock::now();
  int Size = I.Comm.size();
  Result.RankLocalUs.assign(Size, {});
  Result.RankDecisions.assign(Size, {});
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
  if (Size == 1 || I.CommBroken) {
    I.addPhase("gather", msSince(T0));
    return;
  }

  // Every rank's view, for the report: rank 0 reports everyone's.
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
  OS << llvm::json::Value(llvm::json::Object{{"local", std::move(Nodes)},
                                             {"decisions", std::move(Dec)}});
  std::vector<std::string> All;
  if (I.Comm.allGather(OS.str(), All,
                       I.Opts.ChoiceTimeout + I.Opts.AgreementTimeout) !=
      CommStatus::Ok)
    All.assign(Size, "");
  for (int R = 0; R < Size; ++R) {
    if (R == I.rank())
      continue;
    llvm::Expected<llvm::json::Value> V = llvm::json::parse(All[R]);
    if (!V) {
      llvm::consumeError(V.takeError());
      continue;
    }
    const llvm::json::Object *O = V->getAsObject();
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

namespace {

class AutotunePass : public Pass {
public:
  explicit AutotunePass(Autotuner *Session) : Session(Session) {}
  llvm::StringRef getArgument() const override { return "autotune"; }
  llvm::StringRef getDescription() const override {
    return "Pre-sync all ranks once, then benchmark and decide every "
           "multi-template buffer, with and without its epilogue";
  }
  llvm::Error run(Graph &G) override {
    if (!Session)
      return Ctx.Diags->error(G.getLoc(),
                              "the autotune pass needs an autotuner session");
    return Session->tuneGraph(G);
  }

private:
  Autotuner *Session;
};

} // namespace

std::unique_ptr<Pass> mtsched::createAutotunePass(Autotuner *Session) {
  return std::make_unique<AutotunePass>(Session);
}
