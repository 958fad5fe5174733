//===- SplitByNode.cpp - --split-tuning=nodes's plan for a graph ----------===//
//
// The part of the autotuner's walk that runs before it under
// --split-tuning=nodes: what each node of a graph will need measured, for
// ChoiceMeasurer::measureByNode to deal out and measure ahead.
//
//===----------------------------------------------------------------------===//
#include "AutotunerImpl.h"
#include "mtsched/Autotune/Workload.h"
#include "llvm/Support/TimeProfiler.h"

using namespace mtsched;

void Autotuner::Impl::measureByNode(
    const Graph &G, llvm::ArrayRef<MultiTemplateBufferNode *> Todo,
    const std::vector<std::string> *Entries) {
  llvm::TimeTraceScope Scope("split by node");
  // Non-collective world nodes the cache does not answer; a node whose
  // entry replays measures what the entry lacks in its own walk.
  std::vector<ChoiceMeasurer::NodeWork> Work;
  for (size_t K = 0; K < Todo.size(); ++K) {
    MultiTemplateBufferNode &N = *Todo[K];
    if (llvm::isa<CollectiveMultiTemplateBufferNode>(N) ||
        !subgroupOf(G, N).empty() ||
        (Entries && llvm::StringRef((*Entries)[K]).starts_with("H")))
      continue;
    ChoiceMeasurer::NodeWork NW;
    NW.N = &N;
    NW.W = describeNode(M, G, N);
    NW.WithFused = !N.getEpilogue().empty() && Heuristic->considersFusion() &&
                   Heuristic->needsMeasuredFusedTimes();
    if (NW.W.K == Workload::Kind::Gemm)
      for (int64_t Hint : Opts.SizeHintsM)
        NW.Hints.push_back({Hint, describeNode(M, G, N, Hint)});
    Work.push_back(std::move(NW));
  }
  // A failed exchange breaks the agreement: the nodes then fall back.
  Measurer.measureByNode(Work);
}
