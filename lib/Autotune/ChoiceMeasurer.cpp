//===- ChoiceMeasurer.cpp - The measurement stack -------------------------===//
#include "mtsched/Autotune/ChoiceMeasurer.h"
#include "mtsched/Autotune/BlasEpilogue.h"
#include "mtsched/Lowering/ChoiceConfig.h"
#include "mtsched/Lowering/CublasLtChoice.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/TimeProfiler.h"
#include <cmath>

using namespace mtsched;

static constexpr double Inf = std::numeric_limits<double>::infinity();

BuildInput ChoiceMeasurer::buildInput(const MultiTemplateBufferNode &N,
                                      const Workload &W) {
  BuildInput In{&N, W, {}};
  for (const std::string &P : pruneReasons(N, W))
    In.Kept.push_back(P.empty());
  return In;
}

void ChoiceMeasurer::planBuild(const MultiTemplateBufferNode &N,
                               const Workload &W,
                               std::vector<BuildInput> &Batch) {
  if (llvm::isa<CollectiveMultiTemplateBufferNode>(N) ||
      !Planned.insert(workloadKey(W, false) + workloadKey(W, true)).second)
    return;
  std::vector<bool> Kept;
  if (willMeasure(N, W, Kept))
    Batch.push_back(BuildInput{&N, W, std::move(Kept)});
}

void ChoiceMeasurer::build(llvm::ArrayRef<BuildInput> Batch) {
  std::vector<BuildInput> New;
  for (const BuildInput &In : Batch)
    if (!Built.count({In.N, workloadKey(In.W, false)}))
      New.push_back(In);
  if (New.empty())
    return;
  llvm::TimeTraceScope Scope(
      "build", [&] { return std::to_string(New.size()) + " nodes"; });
  std::vector<BuiltChoices> Out = Build.build(New);
  for (size_t K = 0; K < New.size(); ++K) {
    BuiltChoices &B = Built[{New[K].N, workloadKey(New[K].W, false)}];
    if (K < Out.size())
      B = std::move(Out[K]);
    B.resize(New[K].N->getChoices().size());
  }
}

const BuiltChoices &ChoiceMeasurer::built(const MultiTemplateBufferNode &N,
                                          const Workload &W) {
  auto It = Built.find({&N, workloadKey(W, false)});
  if (It != Built.end())
    return It->second;
  // Not in a batch (a size hint, a node decided alone): built now, with
  // the choices pruning keeps.
  build(buildInput(N, W));
  return Built[{&N, workloadKey(W, false)}];
}

void ChoiceMeasurer::finishBuilds() {
  for (auto &KV : Built)
    for (const BuildResult &B : KV.second)
      if (B.Built)
        (void)B.Built->wait();
  Built.clear();
}

Measurement ChoiceMeasurer::runChoice(const MultiTemplateBufferNode &N,
                                      const Workload &W, size_t I, bool Fused) {
  const BuildResult &B = built(N, W)[I];
  if (B.failed())
    return Measurement{ChoiceStatus::Failed, Inf, B.Error};
  return Run.measure(N, W, N.getChoices()[I], Fused, B);
}

bool ChoiceMeasurer::willMeasure(const MultiTemplateBufferNode &N,
                                 const Workload &W, std::vector<bool> &Kept) {
  std::vector<std::string> Pruned = pruneReasons(N, W);
  Kept.clear();
  bool Needed = false;
  for (size_t I = 0; I < Pruned.size(); ++I) {
    Kept.push_back(Pruned[I].empty());
    Needed |= Kept.back() &&
              !Store.findMemo(choiceMemoKey(W, false, N.getChoices()[I]));
  }
  return Needed;
}

double mtsched::roundUs(double Us) {
  return std::isfinite(Us) ? std::round(Us * 1000.0) / 1000.0 : Us;
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

} // namespace

std::string ChoiceMeasurer::choiceMemoKey(const Workload &W, bool Fused,
                                          const Choice &C) const {
  return choiceKey(workloadKey(W, Fused) + Ranks.nodeGroupKey(), C);
}

std::string ChoiceMeasurer::epilogueMemoKey(const Workload &W) const {
  const Choice Epi{"<epilogue>", {}, {}};
  return choiceKey(workloadKey(W, /*Fused=*/true), Epi) + Ranks.nodeGroupKey();
}

std::vector<AgreedMeasurement>
ChoiceMeasurer::measureChoices(const MultiTemplateBufferNode &N,
                               const Workload &W, int64_t Hint, bool Fused,
                               const std::vector<bool> &Skip, NodeState &S) {
  bool Collective = llvm::isa<CollectiveMultiTemplateBufferNode>(N);
  // Work split (--split-tuning=on): the K-th choice that needs measuring
  // is timed by rank K mod size only. Every rank skips the same choices
  // (memo, cache, pruning and failures are agreed state), so the shares are
  // disjoint and cover every choice; the others contribute -inf, which the
  // max-reduction ignores. Under `nodes`, what measureByNode left to the
  // walk is timed by every rank.
  Communicator &Comm = Ranks.nodeComm();
  bool Split =
      Opts.SplitTuning && !Opts.SplitByNode && !Collective && Comm.size() > 1;
  size_t ToMeasure = 0;
  std::vector<AgreedMeasurement> Out(N.getChoices().size());
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
    if (!Ranks.agreeMaxNamingPeers(PendingValues, Bound)) {
      S.Unmeasured = true;
      for (size_t J : Pending)
        Out[J].Status = ChoiceStatus::Skipped;
    } else {
      for (size_t K = 0; K < Pending.size(); ++K) {
        AgreedMeasurement &A = Out[Pending[K]];
        ChoiceStatus St = statusFromCode(PendingValues[2 * K + 1]);
        if (St != ChoiceStatus::Ok && A.Status == ChoiceStatus::Ok)
          A.Message = "failed on another rank";
        A.Status = St;
        A.Us = St == ChoiceStatus::Ok ? roundUs(PendingValues[2 * K]) : Inf;
        Store.remember(choiceMemoKey(W, Fused, N.getChoices()[Pending[K]]), A);
      }
    }
    Pending.clear();
    PendingValues.clear();
  };
  std::vector<std::string> Pruned = pruneReasons(N, W);
  for (size_t I = 0; I < N.getChoices().size(); ++I) {
    const Choice &C = N.getChoices()[I];
    if (Fused && !canFuseEpilogue(C, W.BlasEpilogue)) {
      Out[I].Message = cublasLtAlgoOf(C.Name)
                           ? "cuBLASLt fuses a bias or residual add only"
                           : "extern choices cannot fuse";
      continue;
    }
    if (!Pruned[I].empty()) {
      Out[I].Message = Pruned[I];
      Out[I].Pruned = true;
      continue;
    }
    if (I < Skip.size() && Skip[I]) {
      Out[I].Message = "not tried fused: it failed unfused";
      continue;
    }
    std::string Key = choiceMemoKey(W, Fused, C);
    const AgreedMeasurement *Hit =
        Ranks.isBroken() ? nullptr : Store.findMemo(Key);
    if (Hit) {
      ++Counters.MemoHits;
      Out[I] = *Hit;
      Store.record(Key, Out[I]);
      continue;
    }
    if (Store.replay(Key, Out[I], S.Missing))
      continue;
    if (S.Missing)
      continue;
    if (Ranks.isDegraded()) {
      S.Unmeasured = true;
      continue;
    }
    if (Opts.CacheOnly) {
      // Whatever the cache's state, --cache-only never benchmarks.
      S.Missing = true;
      Out[I].Message = "not in the autotune cache (--cache-only)";
      continue;
    }
    if (Collective &&
        !Ranks.barrier(Opts.ChoiceTimeout,
                       "a peer stopped answering during benchmarking")) {
      S.Unmeasured = true;
      continue;
    }
    if (Split && int(ToMeasure++ % size_t(Comm.size())) != Comm.rank()) {
      // Another rank's share: this rank measured nothing.
      Out[I].Status = ChoiceStatus::Ok;
      Pending.push_back(I);
      PendingValues.push_back(-Inf);
      PendingValues.push_back(statusCode(ChoiceStatus::Ok));
      continue;
    }
    Measurement Local;
    {
      llvm::TimeTraceScope Scope("benchmark", [&] {
        return "%" + N.getName() + " " + C.Name + (Fused ? " fused" : "") +
               (Hint ? " @" + std::to_string(Hint) : "");
      });
      Local = runChoice(N, W, I, Fused);
    }
    ++Counters.BenchmarksRun;
    Out[I].LocalUs = Local.Status == ChoiceStatus::Ok ? Local.Us : Inf;
    Out[I].Message = Local.Message;
    Out[I].Status = Local.Status;
    Pending.push_back(I);
    PendingValues.push_back(Out[I].LocalUs);
    PendingValues.push_back(statusCode(Local.Status));
    if (Collective)
      Flush();
  }
  if (!Ranks.isDegraded())
    Flush();
  return Out;
}

AgreedMeasurement
ChoiceMeasurer::measureEpilogue(const MultiTemplateBufferNode &N,
                                const Workload &W, NodeState &S) {
  AgreedMeasurement A;
  std::string Key = epilogueMemoKey(W);
  const AgreedMeasurement *Hit =
      Ranks.isBroken() ? nullptr : Store.findMemo(Key);
  if (Hit) {
    ++Counters.MemoHits;
    Store.record(Key, *Hit);
    return *Hit;
  }
  if (Store.replay(Key, A, S.Missing))
    return A;
  if (S.Missing)
    return A;
  if (Ranks.isDegraded()) {
    S.Unmeasured = true;
    return A;
  }
  if (Opts.CacheOnly) {
    S.Missing = true;
    return A;
  }
  Measurement Local = Run.measureEpilogue(N, W);
  ++Counters.BenchmarksRun;
  std::vector<double> V{Local.Status == ChoiceStatus::Ok ? Local.Us : Inf};
  if (!Ranks.agreeMax(V, Opts.ChoiceTimeout + Opts.AgreementTimeout,
                      "a peer stopped answering during benchmarking")) {
    S.Unmeasured = true;
    return A;
  }
  A.Status = std::isfinite(V[0]) ? ChoiceStatus::Ok : ChoiceStatus::Failed;
  A.Us = roundUs(V[0]);
  A.LocalUs = Local.Us;
  Store.remember(Key, A);
  return A;
}

std::vector<AgreedMeasurement>
ChoiceMeasurer::measureForms(llvm::ArrayRef<std::vector<FormKernel>> Forms,
                             const SustainedProtocol &P) {
  if (Ranks.isDegraded() || Opts.CacheOnly)
    return {};
  // Remembered by what runs and how it is timed.
  std::string Key = "<forms " + std::to_string(P.Rounds) + "x" +
                    std::to_string(P.WarmUs) + "+" +
                    std::to_string(P.SampleUs) + ">";
  for (const std::vector<FormKernel> &F : Forms) {
    Key += "[";
    for (const FormKernel &K : F)
      Key += (K.C ? choiceKey(workloadKey(K.W, K.Fused), *K.C)
                  : epilogueMemoKey(K.W)) +
             ";";
    Key += "]";
  }
  Key += Ranks.nodeGroupKey();
  std::vector<AgreedMeasurement> Out(Forms.size());
  bool Known = !Ranks.isBroken();
  for (size_t I = 0; Known && I < Forms.size(); ++I) {
    const AgreedMeasurement *Hit =
        Store.findMemo(Key + "#" + std::to_string(I));
    if (Hit)
      Out[I] = *Hit;
    Known = Hit != nullptr;
  }
  if (Known) {
    Counters.MemoHits += unsigned(Forms.size());
    return Out;
  }
  std::vector<Measurement> Local = Run.measureForms(Forms, P);
  Counters.BenchmarksRun += unsigned(Forms.size());
  std::vector<double> V;
  for (size_t I = 0; I < Forms.size(); ++I)
    V.push_back(I < Local.size() && Local[I].Status == ChoiceStatus::Ok
                    ? Local[I].Us
                    : Inf);
  if (!Ranks.agreeMax(V, Opts.ChoiceTimeout + Opts.AgreementTimeout,
                      "a peer stopped answering during benchmarking"))
    return {};
  for (size_t I = 0; I < Forms.size(); ++I) {
    AgreedMeasurement &A = Out[I];
    A.Status = std::isfinite(V[I]) ? ChoiceStatus::Ok : ChoiceStatus::Failed;
    A.Us = roundUs(V[I]);
    A.LocalUs = I < Local.size() ? Local[I].Us : Inf;
    if (I < Local.size())
      A.Message = Local[I].Message;
    Store.remember(Key + "#" + std::to_string(I), A);
  }
  return Out;
}

namespace {
/// A time measureByNode plans: choice C of node Node at workload W (at size
/// Hint, 0 for the node's own), fused or not, or the node's epilogue alone
/// (C null).
struct Slot {
  size_t Node;
  std::string Key;
  const Workload *W;
  int64_t Hint;
  bool Fused;
  const Choice *C;
  size_t Index;
};
} // namespace

bool ChoiceMeasurer::measureByNode(llvm::ArrayRef<NodeWork> Nodes,
                                   llvm::ArrayRef<BuildInput> Also) {
  Communicator &Comm = Ranks.nodeComm();
  int Size = Comm.size(), Rank = Comm.rank();
  // The plan: every time not yet known, once, in node order; the same on
  // every rank (pruning and the memo are agreed state).
  std::vector<Slot> Slots;
  llvm::StringSet<> Planned;
  std::vector<size_t> Begin;
  auto Plan = [&](size_t K, const Workload &W, int64_t Hint, bool Fused,
                  const Choice *C, size_t I) {
    std::string Key = C ? choiceMemoKey(W, Fused, *C) : epilogueMemoKey(W);
    if (Store.findMemo(Key) || !Planned.insert(Key).second)
      return;
    Slots.push_back({K, std::move(Key), &W, Hint, Fused, C, I});
  };
  for (auto [K, NW] : llvm::enumerate(Nodes)) {
    Begin.push_back(Slots.size());
    const std::vector<Choice> &Choices = NW.N->getChoices();
    std::vector<std::string> Pruned = pruneReasons(*NW.N, NW.W);
    for (size_t I = 0; I < Choices.size(); ++I)
      if (Pruned[I].empty())
        Plan(K, NW.W, 0, false, &Choices[I], I);
    if (NW.WithFused) {
      for (size_t I = 0; I < Choices.size(); ++I)
        if (Pruned[I].empty() && canFuseEpilogue(Choices[I], NW.W.BlasEpilogue))
          Plan(K, NW.W, 0, true, &Choices[I], I);
      Plan(K, NW.W, 0, true, nullptr, 0);
    }
    for (const auto &[Hint, HW] : NW.Hints) {
      std::vector<std::string> PrunedAt = pruneReasons(*NW.N, HW);
      for (size_t I = 0; I < Choices.size(); ++I)
        if (PrunedAt[I].empty())
          Plan(K, HW, Hint, false, &Choices[I], I);
    }
  }
  Begin.push_back(Slots.size());
  // Groups and their work: a node's times, plus one for preparing it.
  std::vector<size_t> GroupOf(Nodes.size()), GroupLoad(Nodes.size(), 0);
  size_t Busy = 0;
  for (size_t K = 0; K < Nodes.size(); ++K) {
    int G = Nodes[K].Group;
    GroupOf[K] = G >= 0 && size_t(G) < K ? GroupOf[size_t(G)] : K;
    if (size_t Count = Begin[K + 1] - Begin[K]) {
      Busy += GroupLoad[GroupOf[K]] == 0;
      GroupLoad[GroupOf[K]] += Count + 1;
    }
  }
  // Fewer groups than ranks: a rank would have nothing to do, and the
  // walk's timing on every rank compares choices on one GPU each.
  if (Busy < size_t(Size))
    return true;
  // Owners: each group, at its first node, to the rank with the least work
  // so far, lowest rank on ties.
  std::vector<int> Owner(Nodes.size(), 0);
  std::vector<size_t> Load(size_t(Size), 0), Owned(size_t(Size), 0);
  for (size_t K = 0; K < Nodes.size(); ++K) {
    if (GroupOf[K] == K && GroupLoad[K]) {
      Owner[K] = int(llvm::min_element(Load) - Load.begin());
      Load[size_t(Owner[K])] += GroupLoad[K];
    }
    Owner[K] = Owner[GroupOf[K]];
    Owned[size_t(Owner[K])] += Begin[K + 1] - Begin[K];
  }
  // This rank's nodes, built at once: the builder compiles the next while
  // the runner times one.
  std::vector<BuildInput> Batch(Also.begin(), Also.end());
  for (size_t K = 0; K < Nodes.size(); ++K)
    if (Owner[K] == Rank && Begin[K + 1] > Begin[K])
      planBuild(*Nodes[K].N, Nodes[K].W, Batch);
  build(Batch);
  // This rank's nodes, as the node's own walk would measure them.
  std::vector<double> Values(2 * Slots.size(), -Inf);
  std::vector<Measurement> Local(Slots.size());
  std::vector<ChoiceStatus> Unfused;
  for (size_t S = 0; S < Slots.size(); ++S) {
    const Slot &Sl = Slots[S];
    Values[2 * S + 1] = statusCode(ChoiceStatus::Ok);
    if (Owner[Sl.Node] != Rank)
      continue;
    const MultiTemplateBufferNode &N = *Nodes[Sl.Node].N;
    if (S == Begin[Sl.Node])
      Unfused.assign(N.getChoices().size(), ChoiceStatus::Ok);
    // A choice that failed unfused is tried neither fused nor at a hint,
    // whether it failed now or in the memo.
    if (Sl.C && (Sl.Fused || Sl.Hint)) {
      ChoiceStatus U = Unfused[Sl.Index];
      if (const AgreedMeasurement *M =
              Store.findMemo(choiceMemoKey(Nodes[Sl.Node].W, false, *Sl.C)))
        U = M->Status;
      if (U != ChoiceStatus::Ok)
        continue;
    }
    {
      llvm::TimeTraceScope Scope("benchmark", [&] {
        return "%" + N.getName() + " " + (Sl.C ? Sl.C->Name : "<epilogue>") +
               (Sl.Fused && Sl.C ? " fused" : "") +
               (Sl.Hint ? " @" + std::to_string(Sl.Hint) : "");
      });
      // Built with the choices pruning keeps (in the batch above, or at a
      // size hint now): the cuda backend compiled every pruned choice
      // too otherwise (8.6 s of NVRTC in one Llama layer's first run).
      Local[S] = Sl.C ? runChoice(N, *Sl.W, Sl.Index, Sl.Fused)
                      : Run.measureEpilogue(N, *Sl.W);
    }
    ++Counters.BenchmarksRun;
    if (Sl.C && !Sl.Fused && !Sl.Hint)
      Unfused[Sl.Index] = Local[S].Status;
    Values[2 * S] = Local[S].Status == ChoiceStatus::Ok ? Local[S].Us : Inf;
    Values[2 * S + 1] = statusCode(Local[S].Status);
  }
  // One exchange: each time from its owner, -inf from the others; a time
  // still -inf was not taken (the node's walk skips it too).
  auto Bound = Opts.ChoiceTimeout * int64_t(*llvm::max_element(Owned)) +
               Opts.AgreementTimeout;
  if (!Ranks.agreeMaxNamingPeers(Values, Bound))
    return false;
  for (size_t S = 0; S < Slots.size(); ++S) {
    if (Values[2 * S] == -Inf)
      continue;
    AgreedMeasurement A;
    A.Status = statusFromCode(Values[2 * S + 1]);
    A.Us = A.Status == ChoiceStatus::Ok ? roundUs(Values[2 * S]) : Inf;
    if (Owner[Slots[S].Node] == Rank) {
      A.LocalUs = Local[S].Status == ChoiceStatus::Ok ? Local[S].Us : Inf;
      A.Message = Local[S].Message;
    }
    Store.remember(Slots[S].Key, A);
  }
  return true;
}

/// The kind of kernel a choice is, for pruning: the model's error is mostly
/// shared within a kind (a template it over- or under-rates as a whole), so
/// the best-ranked choice of each kind is always measured.
static std::string choiceFamily(const Choice &C) {
  if (C.isExtern())
    return "extern";
  if (std::optional<GemmTileConfig> T = gemmTileOf(C))
    return std::string(T->Template == GemmTemplate::Wgmma ? "wgmma" : "mma") +
           (T->SplitK > 1 ? "-split-k" : "");
  // The persistent merged tiles are a kind of their own: the model prices
  // them as the plain wgmma tile, so at Llama-3-70B's prefill they ranked
  // behind it and were never measured, though they ran 25% faster (H200,
  // 2026-11-29, docs/BENCHMARKS.md).
  if (std::optional<GemmTileConfig> T = swigluTileOf(C))
    return T->Template != GemmTemplate::Wgmma ? "swiglu-mma"
           : T->Persistent                    ? "swiglu-wgmma-persistent"
                                              : "swiglu-wgmma";
  if (std::optional<AttentionTile> T = attentionTileOf(C))
    return std::string(T->Dec   ? "attn-dec"
                       : T->Mma ? "attn-mma"
                                : "flash") +
           (T->Splits > 1 ? "-split-kv" : "") +
           (T->Persistent && T->Dec ? "-persistent" : "");
  return C.Name == AttentionMathChoice ? "attn-math" : "other";
}

std::vector<std::string>
ChoiceMeasurer::pruneReasons(const MultiTemplateBufferNode &N,
                             const Workload &W) const {
  size_t Count = N.getChoices().size();
  std::vector<std::string> Out(Count);
  if (Opts.PruneTopK == 0 || Opts.PruneTopK >= Count)
    return Out;
  std::vector<std::pair<double, size_t>> Ranked;
  for (size_t I = 0; I < Count; ++I)
    Ranked.push_back({Model.choiceUs(W, N.getChoices()[I], false), I});
  llvm::sort(Ranked);
  // Only what the model ranks strictly below the K-th best is pruned: a
  // choice it cannot price (+inf: a kind it does not know) or cannot tell
  // from the K-th (a tie) is measured, since leaving it out would be program
  // order, not a prediction. The best-ranked choice of each kind of kernel
  // is measured too: on an H100 the roofline rates the mma.sync template
  // above the wgmma one, which is 2.4x faster at 4096^3.
  double KthUs = Ranked[Opts.PruneTopK - 1].first;
  llvm::StringSet<> Families;
  for (size_t R = 0; R < Opts.PruneTopK; ++R)
    Families.insert(choiceFamily(N.getChoices()[Ranked[R].second]));
  for (size_t R = Opts.PruneTopK; R < Count; ++R) {
    if (!std::isfinite(Ranked[R].first) || !std::isfinite(KthUs) ||
        Ranked[R].first <= KthUs)
      continue;
    if (Families.insert(choiceFamily(N.getChoices()[Ranked[R].second])).second)
      continue;
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
