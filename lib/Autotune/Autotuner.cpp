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
#include "llvm/Support/xxhash.h"
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

uint64_t mtsched::fingerprintCollectives(
    const Graph &G,
    llvm::ArrayRef<const CollectiveMultiTemplateBufferNode *> Nodes) {
  std::string S;
  llvm::raw_string_ostream OS(S);
  OS << '@' << G.getName();
  for (const CollectiveMultiTemplateBufferNode *N : Nodes) {
    OS << "|%" << N->getName() << ' ' << N->getOpName() << ' '
       << collectiveKindName(N->getCollectiveKind()) << " @" << N->getGroup();
    for (const Operand &O : N->getOperands())
      OS << ' ' << O.V->getType().str();
    OS << " -> " << N->getType().str() << " [";
    for (const Choice &C : N->getChoices())
      OS << C.Name << ',';
    OS << ']';
  }
  return llvm::xxHash64(OS.str());
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
  /// nothing crosses ranks and every node is decided by the fallback rules.
  bool Degraded = false;
  std::string DegradedReason;
  /// Set when a peer stopped answering: even the final gather is skipped.
  bool CommBroken = false;
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

  RunResult &result() { return Self.Result; }
  int rank() const { return Comm.rank(); }

  void warn(llvm::SMLoc Loc, const llvm::Twine &Msg) {
    Diags.warning(Loc, "rank " + llvm::Twine(rank()) + ": " + Msg);
  }
  void addPhase(llvm::StringRef Name, double Ms) {
    result().PhasesMs[Name.str()] += Ms;
  }

  llvm::Error applyRankFaults();
  /// Barrier with the pre-sync window, then agreement on (ok, fingerprint)
  /// within the choice timeout. Returns an empty string on success, else
  /// the reason.
  std::string sync(uint64_t Fingerprint);
  std::string fallbackChoice(const MultiTemplateBufferNode &N) const;
  void decideWithoutBenchmark(const Graph &G, MultiTemplateBufferNode &N,
                              llvm::StringRef Reason);
  /// Measures the choices of N (fused or not) at a size, max-reduced.
  /// Choices whose entry in Skip is set are not measured (a choice that
  /// failed unfused is not tried fused).
  std::vector<Agreed> measureChoices(const Graph &G,
                                     const MultiTemplateBufferNode &N,
                                     const Workload &W, int64_t Hint,
                                     bool Fused,
                                     const std::vector<bool> &Skip = {});
  Agreed measureEpilogue(const MultiTemplateBufferNode &N, const Workload &W);
  /// Finalizes N: cache lookup (broadcast from rank 0), then finalizeNode,
  /// then storing what was measured.
  void finalize(const Graph &G, MultiTemplateBufferNode &N, bool WithFusion);
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
  if (const Fault *F = Opts.Faults.rankFault(Fault::Kind::Late, rank()))
    std::this_thread::sleep_for(std::chrono::milliseconds(F->DelayMs));
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

std::string Autotuner::Impl::sync(uint64_t Fingerprint) {
  llvm::TimeTraceScope Scope("pre-sync");
  if (Degraded)
    return DegradedReason;
  ++result().Sync.Count;
  CommStatus Barrier = Comm.barrier(Opts.PreSyncTimeout);
  std::string Mine = std::string(Barrier == CommStatus::Ok ? "1:" : "0:") +
                     llvm::utohexstr(Fingerprint);
  std::vector<std::string> All;
  CommStatus Gather = Comm.allGather(Mine, All, Opts.ChoiceTimeout);
  if (Gather != CommStatus::Ok) {
    Degraded = CommBroken = true;
    DegradedReason = Gather == CommStatus::Failed
                         ? "a peer exited before the pre-sync completed"
                         : "peers did not answer within " +
                               std::to_string(Opts.ChoiceTimeout.count()) +
                               " ms after the pre-sync window";
    return DegradedReason;
  }
  std::vector<std::string> Late;
  for (size_t R = 0; R < All.size(); ++R)
    if (!llvm::StringRef(All[R]).starts_with("1:"))
      Late.push_back(std::to_string(R));
  if (!Late.empty())
    return "the " + std::to_string(Opts.PreSyncTimeout.count()) +
           " ms pre-sync window expired on rank(s) " + llvm::join(Late, ", ");
  for (size_t R = 1; R < All.size(); ++R)
    if (All[R].substr(2) != All[0].substr(2))
      return "ranks collected different collective nodes (rank " +
             std::to_string(R) + " fingerprint " + All[R].substr(2) +
             ", rank 0 fingerprint " + All[0].substr(2) + ")";
  return "";
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
                                             llvm::StringRef Reason) {
  NodeResult R = startRecord(G, N);
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
  result().Nodes.push_back(std::move(R));
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
static std::string unknownChoiceIn(const CacheEntry &E,
                                   const MultiTemplateBufferNode &N) {
  llvm::StringSet<> Known;
  Known.insert("<epilogue>");
  for (const Choice &C : N.getChoices())
    Known.insert(llvm::StringRef(choiceKey("", C)).drop_front());
  for (const auto &KV : E.Records) {
    size_t Bar = KV.first.find('|');
    llvm::StringRef Name = Bar == std::string::npos
                               ? llvm::StringRef()
                               : llvm::StringRef(KV.first).substr(Bar + 1);
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
  const std::string Prefix = workloadKey(W, Fused);
  // Local results still to be max-reduced: after every choice for a
  // collective (all ranks run it together), once per node otherwise.
  std::vector<size_t> Pending;
  std::vector<double> PendingValues;
  auto Flush = [&] {
    if (Pending.empty())
      return;
    if (Comm.allReduceMax(PendingValues, Opts.ChoiceTimeout) !=
        CommStatus::Ok) {
      Degraded = CommBroken = true;
      DegradedReason = "a peer stopped answering during benchmarking";
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
    auto Hit = Memo.find(Key);
    if (Hit != Memo.end()) {
      ++result().MemoHits;
      Out[I] = Hit->second;
      record(Key, Out[I]);
      continue;
    }
    if (replayed(Key, Out[I]))
      continue;
    if (Degraded || NodeMissing)
      continue;
    if (Opts.CacheOnly) {
      // Whatever the cache's state, --cache-only never benchmarks.
      NodeMissing = true;
      Out[I].Message = "not in the autotune cache (--cache-only)";
      continue;
    }
    if (Collective && Comm.barrier(Opts.ChoiceTimeout) != CommStatus::Ok) {
      Degraded = CommBroken = true;
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
  std::string Key = memoKey(W, Epi, /*Fused=*/true);
  auto Hit = Memo.find(Key);
  if (Hit != Memo.end()) {
    ++result().MemoHits;
    record(Key, Hit->second);
    return Hit->second;
  }
  if (replayed(Key, A))
    return A;
  if (Degraded || NodeMissing)
    return A;
  if (Opts.CacheOnly) {
    NodeMissing = true;
    return A;
  }
  Measurement Local = Self.Bench->measureEpilogue(N, W);
  ++result().BenchmarksRun;
  std::vector<double> V{Local.Status == ChoiceStatus::Ok ? Local.Us : Inf};
  if (Comm.allReduceMax(V, Opts.ChoiceTimeout) != CommStatus::Ok) {
    Degraded = CommBroken = true;
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
                               bool WithFusion) {
  CacheActive = NodeMissing = false;
  Replay = CacheEntry();
  Recording = CacheEntry();
  std::string Key;
  if (Cache && !Degraded) {
    Key = cacheKeyOf(M, G, N, Opts, Self.Bench->getBackendName(),
                     Self.Bench->getVersion(), Comm.size());
    // Rank 0's cache decides for every rank: "H" + entry, or "M".
    std::string Data = "M";
    if (rank() == 0) {
      AutotuneCache::LookupResult L = Cache->lookup(Key);
      if (L.State == AutotuneCache::LookupState::Hit) {
        std::string Unknown = unknownChoiceIn(L.Entry, N);
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
    if (Comm.broadcast(Data, 0, Opts.ChoiceTimeout) != CommStatus::Ok) {
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
  if (Degraded || rank() != 0 || Opts.CacheOnly)
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
  if (Degraded) {
    decideWithoutBenchmark(G, N, DegradedReason);
    return;
  }
  if (NodeMissing) {
    decideWithoutBenchmark(G, N, "not in the autotune cache (--cache-only)");
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
    if (Degraded) {
      decideWithoutBenchmark(G, N, DegradedReason);
      return;
    }
    if (NodeMissing) {
      decideWithoutBenchmark(G, N, "not in the autotune cache (--cache-only)");
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

  // One winner per size hint, measured at that size.
  bool Hintable = W.K != Workload::Kind::Custom;
  for (int64_t Hint : Hintable ? Opts.SizeHints : std::vector<int64_t>()) {
    Workload HW = describeNode(M, G, N, Hint);
    std::vector<Agreed> AtHint = measureChoices(G, N, HW, Hint, false);
    if (Degraded || NodeMissing)
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

llvm::Error Autotuner::decideNow(Graph &G, MultiTemplateBufferNode &N) {
  Impl &I = *P;
  if (llvm::Error E = I.applyRankFaults())
    return E;
  auto T0 = Clock::now();
  if (auto *C = llvm::dyn_cast<CollectiveMultiTemplateBufferNode>(&N)) {
    const CollectiveMultiTemplateBufferNode *One[] = {C};
    uint64_t Fp = fingerprintCollectives(G, One);
    if (I.Opts.Faults.rankFault(Fault::Kind::Mismatch, I.rank()))
      Fp = ~Fp;
    auto S0 = Clock::now();
    std::string Why = I.sync(Fp);
    Result.Sync.Ms += msSince(S0);
    I.addPhase("pre_sync", msSince(S0));
    if (!Why.empty()) {
      Result.Sync.Ok = false;
      if (Result.Sync.Reason.empty())
        Result.Sync.Reason = Why;
      I.warn(N.getLoc(), "sync for '%" + N.getName() + "' failed: " + Why +
                             "; falling back to '" + I.fallbackChoice(N) + "'");
      I.decideWithoutBenchmark(G, N, Why);
      I.addPhase("benchmark", msSince(T0));
      return llvm::Error::success();
    }
  }
  I.finalize(G, N, /*WithFusion=*/false);
  I.addPhase("benchmark", msSince(T0));
  if (I.CacheOnlyFailed)
    return llvm::make_error<ReportedError>();
  return llvm::Error::success();
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

  std::string SyncFailure;
  if (!Collectives.empty()) {
    auto S0 = Clock::now();
    uint64_t Fp = fingerprintCollectives(G, Collectives);
    // A rank that collected a different list: it misses the last node.
    if (I.Opts.Faults.rankFault(Fault::Kind::Mismatch, I.rank()))
      Fp = fingerprintCollectives(G, llvm::ArrayRef(Collectives).drop_back());
    SyncFailure = I.sync(Fp);
    double Ms = msSince(S0);
    Result.Sync.Ms += Ms;
    I.addPhase("pre_sync", Ms);
    if (!SyncFailure.empty()) {
      Result.Sync.Ok = false;
      if (Result.Sync.Reason.empty())
        Result.Sync.Reason = SyncFailure;
      I.warn(G.getLoc(), "pre-sync failed: " + SyncFailure +
                             "; every node of '@" + G.getName() +
                             "' falls back to its default choice");
      // Once the pre-sync failed ranks may not even hold the same graph, so
      // nothing else crosses ranks.
      I.Degraded = true;
      I.DegradedReason = SyncFailure;
    }
  }

  auto B0 = Clock::now();
  for (size_t K = 0; K < Todo.size(); ++K) {
    if (I.Degraded)
      I.decideWithoutBenchmark(G, *Todo[K], I.DegradedReason);
    else
      I.finalize(G, *Todo[K], /*WithFusion=*/true);
    I.showProgress(K + 1, Todo.size());
  }
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
  return llvm::Error::success();
}

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
  if (I.Comm.allGather(OS.str(), All, I.Opts.ChoiceTimeout) != CommStatus::Ok)
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
