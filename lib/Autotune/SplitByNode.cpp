//===- SplitByNode.cpp - What the walk will measure, planned ahead --------===//
//
// The parts of the autotuner's walk that run before it: under
// --split-tuning=nodes, what each node of a graph will need measured, for
// ChoiceMeasurer::measureByNode to deal out and measure ahead; and the
// batch of nodes the walk will measure, which the backend's builder builds
// at once, so that it compiles the next while the runner times one, and
// sets its collectives up while the runner times the rest.
//
//===----------------------------------------------------------------------===//
#include "AutotunerImpl.h"
#include "mtsched/Autotune/HorizontalSelect.h"
#include "mtsched/Autotune/Workload.h"
#include "llvm/Support/TimeProfiler.h"
#include <map>

using namespace mtsched;

void Autotuner::Impl::measureByNode(
    const Graph &G, llvm::ArrayRef<MultiTemplateBufferNode *> Todo,
    const std::vector<std::string> *Entries,
    llvm::ArrayRef<BuildInput> Collectives) {
  llvm::TimeTraceScope Scope("split by node");
  // Non-collective world nodes the cache does not answer; a node whose
  // entry replays measures what the entry lacks in its own walk.
  std::vector<ChoiceMeasurer::NodeWork> Work;
  // Every rank builds this list at once: grown by doubling, it peaked at
  // twice its size on each rank (docs/BENCHMARKS.md, "Memory of thread
  // ranks").
  Work.reserve(Todo.size());
  for (size_t K = 0; K < Todo.size(); ++K) {
    MultiTemplateBufferNode &N = *Todo[K];
    if (llvm::isa<CollectiveMultiTemplateBufferNode>(N) ||
        !subgroupOf(G, N).empty() ||
        (Entries && llvm::StringRef((*Entries)[K]).starts_with("H")))
      continue;
    ChoiceMeasurer::NodeWork NW;
    NW.N = &N;
    NW.W = describeNode(M, G, N);
    NW.WithFused = !N.getEpilogue().empty() && Heuristic.considersFusion() &&
                   Heuristic.needsMeasuredFusedTimes();
    if (NW.W.K == Workload::Kind::Gemm) {
      NW.Hints.reserve(Opts.SizeHintsM.size());
      for (int64_t Hint : Opts.SizeHintsM)
        NW.Hints.push_back({Hint, describeNode(M, G, N, Hint)});
    }
    Work.push_back(std::move(NW));
  }
  // A merged SwiGLU GEMM and the gate and up GEMMs it is an alternative
  // of (select-swiglu compares them) go to one rank.
  std::map<std::pair<const Value *, const Value *>, size_t> Gemms;
  for (size_t K = 0; K < Work.size(); ++K)
    if (Work[K].N->getOp() == OpCode::MatMul &&
        Work[K].N->getNumOperands() == 2)
      Gemms.try_emplace({Work[K].N->getOperand(0), Work[K].N->getOperand(1)},
                        K);
  for (size_t K = 0; K < Work.size(); ++K) {
    const MultiTemplateBufferNode &S = *Work[K].N;
    if (S.getOp() != OpCode::SwiGlu || S.getNumOperands() != 3)
      continue;
    std::vector<size_t> Members = {K};
    for (unsigned W : {1u, 2u}) {
      auto It = Gemms.find({S.getOperand(0), S.getOperand(W)});
      if (It != Gemms.end())
        Members.push_back(It->second);
    }
    size_t First = *llvm::min_element(Members);
    for (size_t M : Members)
      Work[M].Group = int(First);
  }
  // So do a merged horizontal GEMM (fuse-horizontal's alternative, over the
  // concatenation of its members' weights) and its members, which
  // select-horizontal compares.
  for (size_t K = 0; K < Work.size(); ++K) {
    const MultiTemplateBufferNode &S = *Work[K].N;
    const mtsched::Node *Cat =
        S.getNumOperands() == 2 ? S.getOperand(1)->getDef() : nullptr;
    if (S.getOp() != OpCode::MatMul || !Cat ||
        !S.getAttrs().contains(HorizontalAlternativeOfAttr))
      continue;
    std::vector<size_t> Members = {K};
    for (const Operand &W : Cat->getOperands()) {
      auto It = Gemms.find({S.getOperand(0), W.V});
      if (It != Gemms.end())
        Members.push_back(It->second);
    }
    size_t First = *llvm::min_element(Members);
    for (size_t M : Members)
      Work[M].Group = int(First);
  }
  // A failed exchange breaks the agreement: the nodes then fall back.
  Measurer.measureByNode(Work, Collectives);
}

bool Autotuner::Impl::measuredByWalk(
    const Graph &G, llvm::ArrayRef<MultiTemplateBufferNode *> Todo,
    const std::vector<std::string> *Entries, size_t K) {
  return subgroupOf(G, *Todo[K]).empty() &&
         !(Entries && llvm::StringRef((*Entries)[K]).starts_with("H"));
}

void Autotuner::Impl::planWalk(const Graph &G,
                               llvm::ArrayRef<MultiTemplateBufferNode *> Todo,
                               const std::vector<std::string> *Entries,
                               std::vector<BuildInput> &Batch) {
  if (Ranks.isDegraded() || Opts.CacheOnly)
    return;
  for (size_t K = 0; K < Todo.size(); ++K)
    if (measuredByWalk(G, Todo, Entries, K))
      Measurer.planBuild(*Todo[K], describeNode(M, G, *Todo[K]), Batch);
}

std::vector<BuildInput> Autotuner::Impl::collectivesToBuild(
    const Graph &G, llvm::ArrayRef<MultiTemplateBufferNode *> Todo,
    const std::vector<std::string> *Entries) {
  std::vector<BuildInput> Batch;
  if (Ranks.isDegraded() || Opts.CacheOnly)
    return Batch;
  for (size_t K = 0; K < Todo.size(); ++K) {
    if (!llvm::isa<CollectiveMultiTemplateBufferNode>(*Todo[K]) ||
        !measuredByWalk(G, Todo, Entries, K))
      continue;
    BuildInput In{Todo[K], describeNode(M, G, *Todo[K]), {}};
    if (Measurer.willMeasure(*In.N, In.W, In.Kept))
      Batch.push_back(std::move(In));
  }
  return Batch;
}
