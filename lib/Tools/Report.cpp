//===- Report.cpp ---------------------------------------------------------===//
//
// The report is streamed: each value goes to the file as it is produced, so
// that a run of a million nodes does not hold a second copy of its results
// as a JSON tree (which cost ten times the run's own memory). Adding a key
// is one J.attribute(...) line where it belongs; docs/REPORT.md lists the
// keys.
//
//===----------------------------------------------------------------------===//
#include "mtsched/Tools/Report.h"
#include "mtsched/Runtime/Topology.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include <charconv>
#include <cmath>

using namespace mtsched;
using JValue = llvm::json::Value;

/// Microseconds as milliseconds, null when not finite. The number is
/// written in the shortest form that reads back to the same double
/// (std::to_chars): a report holds millions of them, and the 17 printf
/// digits json::OStream would use cost more than the rest of the report.
static void writeMs(llvm::json::OStream &J, double Us) {
  if (!std::isfinite(Us))
    return J.value(nullptr);
  J.rawValue([&](llvm::raw_ostream &OS) {
    char Buf[32];
    std::to_chars_result R = std::to_chars(Buf, Buf + sizeof(Buf), Us / 1000.0);
    OS.write(Buf, R.ptr - Buf);
  });
}

static void msAttribute(llvm::json::OStream &J, llvm::StringRef Key,
                        double Us) {
  J.attributeBegin(Key);
  writeMs(J, Us);
  J.attributeEnd();
}

static void writeAttribute(llvm::json::OStream &J, const Attribute &A) {
  switch (A.getKind()) {
  case Attribute::Kind::Int:
    return J.value(A.getInt());
  case Attribute::Kind::Float:
    return J.value(A.getFloat());
  case Attribute::Kind::String:
    return J.value(A.getString());
  case Attribute::Kind::Bool:
    return J.value(A.getBool());
  case Attribute::Kind::List:
    return J.array([&] {
      for (const Attribute &E : A.getList())
        writeAttribute(J, E);
    });
  }
}

/// What calibration needs to predict the node's times again.
static void writeWorkload(llvm::json::OStream &J, const Workload &W) {
  J.attribute("kind", workloadKindName(W.K));
  if (W.K == Workload::Kind::Attention) {
    const AttentionShape &A = W.Attn;
    J.attributeObject("attention", [&] {
      J.attribute("b", A.B);
      J.attribute("hq", A.Hq);
      J.attribute("hkv", A.Hkv);
      J.attribute("sq", A.Sq);
      J.attribute("skv", A.Skv);
      J.attribute("d", A.D);
      J.attribute("causal", A.Causal);
      J.attribute("scale", A.Scale);
      J.attribute("dtype", dtypeName(A.Dtype));
    });
  }
  if (W.K == Workload::Kind::Gemm || W.K == Workload::Kind::SwiGlu) {
    J.attribute("batch", W.Gemm.Batch);
    J.attribute("m", W.Gemm.M);
    J.attribute("n", W.Gemm.N);
    J.attribute("k", W.Gemm.K);
    J.attribute("dtype", dtypeName(W.Gemm.Dtype));
    if (W.Gemm.OperandDtype)
      J.attribute("operand_dtype", dtypeName(*W.Gemm.OperandDtype));
  }
  if (W.Collective != CollectiveKind::None)
    J.attribute("collective", collectiveKindName(W.Collective));
  J.attribute("bytes", W.Bytes);
  J.attribute("ranks", W.Ranks);
  J.attribute("in_bytes", W.InBytes);
  J.attribute("out_bytes", W.OutBytes);
  if (W.Epilogue.NumOps > 0)
    J.attributeObject("epilogue", [&] {
      const EpilogueDesc &E = W.Epilogue;
      J.attribute("ops", E.NumOps);
      J.attribute("elements", E.Elements);
      J.attribute("extra_input_bytes", E.ExtraInputBytes);
      J.attribute("dtype", dtypeName(E.Dtype));
      J.attribute("flops_per_element", E.FlopsPerElement);
      J.attribute("row_reduction", E.RowReduction);
      J.attribute("extra_writes", E.ExtraWrites);
    });
}

static void writeChoice(llvm::json::OStream &J, const ReportInput &In,
                        size_t NI, size_t CI, const ChoiceResult &C) {
  const RunResult &R = *In.Result;
  J.attribute("name", C.Name);
  msAttribute(J, "ms", C.Us);
  J.attributeArray("rank_ms", [&] {
    for (int Rank = 0; Rank < In.WorldSize; ++Rank) {
      bool Known = Rank < int(R.RankLocalUs.size()) &&
                   NI < R.RankLocalUs[Rank].size() &&
                   CI < R.RankLocalUs[Rank][NI].size();
      writeMs(J, Known ? R.RankLocalUs[Rank][NI][CI] : NAN);
    }
  });
  msAttribute(J, "fused_ms", C.FusedUs);
  if (std::isfinite(C.FusedUs))
    J.attribute("fused_predicted", C.FusedPredicted);
  J.attribute("status", choiceStatusName(C.Status));
  if (!C.Message.empty())
    J.attribute("message", C.Message);
  if (!C.FusedMessage.empty())
    J.attribute("fused_message", C.FusedMessage);
  const NodeResult &N = R.Nodes[NI];
  if (N.ChoiceDefs && CI < N.ChoiceDefs->size() &&
      !(*N.ChoiceDefs)[CI].Params.empty())
    J.attributeObject("params", [&] {
      for (const AttrDict::Entry &E : (*N.ChoiceDefs)[CI].Params) {
        J.attributeBegin(E.first);
        writeAttribute(J, E.second);
        J.attributeEnd();
      }
    });
}

static void writeNode(llvm::json::OStream &J, const ReportInput &In,
                      size_t NI) {
  const NodeResult &N = In.Result->Nodes[NI];
  J.attribute("graph", "@" + N.Graph);
  J.attribute("name", N.Name);
  J.attribute("kind", N.Kind);
  J.attribute("op", N.Op);
  J.attribute("group", N.Group.empty() ? JValue(nullptr) : JValue(N.Group));
  J.attributeObject("workload", [&] { writeWorkload(J, N.W); });
  J.attributeArray("choices", [&] {
    for (size_t CI = 0; CI < N.Choices.size(); ++CI)
      J.object([&] { writeChoice(J, In, NI, CI, N.Choices[CI]); });
  });
  J.attribute("chosen", N.Chosen);
  J.attributeArray("epilogue", [&] {
    for (const std::string &E : N.Epilogue)
      J.value(E);
  });
  J.attribute("epilogue_fused", N.EpilogueFused);
  if (!N.Epilogue.empty())
    msAttribute(J, "epilogue_ms", N.EpilogueUs);
  J.attribute("fallback", N.Fallback);
  // --decisions-from: the hint whose entry decided the node (nothing was
  // measured), or why the node was tuned instead.
  if (!In.Result->DecisionsFrom.empty()) {
    J.attribute("dispatch_hint", N.FromDispatchHint > 0
                                     ? JValue(N.FromDispatchHint)
                                     : JValue(nullptr));
    if (!N.DispatchMiss.empty())
      J.attribute("dispatch_miss", N.DispatchMiss);
  }
  J.attributeArray("timed_by", [&] {
    for (int Rank : N.TimedBy)
      J.value(Rank);
  });
  if (!N.Dispatch.empty())
    J.attributeArray("dispatch", [&] {
      for (const DispatchEntry &E : N.Dispatch)
        J.object([&] {
          J.attribute("hint", E.Hint);
          J.attribute("choice", E.Choice);
        });
    });
}

void mtsched::writeReport(llvm::raw_ostream &OS, const ReportInput &In) {
  const RunResult &R = *In.Result;
  llvm::json::OStream J(OS, /*IndentSize=*/0);
  J.object([&] {
    J.attribute("version", 1);
    J.attribute("backend", In.Backend);
    J.attribute("world_size", In.WorldSize);
    J.attribute("mode", collectiveModeName(In.Mode));
    if (In.ModuleCopies >= 0)
      J.attribute("module_copies", In.ModuleCopies);
    if (In.Topo && !In.TopologySource.empty())
      J.attributeObject("topology", [&] {
        J.attribute("source", In.TopologySource);
        // Empty: the default, every rank on one host in one NVLink domain.
        J.attributeArray("hosts", [&] {
          for (const Topology::Host &H : In.Topo->Hosts)
            J.object([&] {
              J.attribute("name", H.Name);
              J.attribute("ranks", llvm::json::Array(H.Ranks));
              J.attributeArray("nvlink_domains", [&] {
                for (const std::vector<int64_t> &D : H.Domains)
                  J.value(llvm::json::Array(D));
              });
            });
        });
      });
    J.attributeObject("sync", [&] {
      J.attribute("count", int64_t(R.Sync.Count));
      J.attribute("ok", R.Sync.Ok);
      J.attribute("ms", R.Sync.Ms);
      J.attribute("reason", R.Sync.Reason);
      J.attribute("deadline_ms", R.Sync.DeadlineMs);
      J.attribute("shape", R.Sync.Shape);
      // Negative: not measured (no pre-sync ran, or it never completed).
      J.attribute("skew_ms", R.Sync.SkewMs < 0
                                 ? llvm::json::Value(nullptr)
                                 : llvm::json::Value(R.Sync.SkewMs));
      J.attribute("cost_ms", R.Sync.CostMs < 0
                                 ? llvm::json::Value(nullptr)
                                 : llvm::json::Value(R.Sync.CostMs));
      // The cost's parts, and every rank's own cost (the reporting rank's
      // place among them decides cost_ms: docs/RANKS.md, "The pre-sync at
      // scale").
      J.attribute("last_wait_ms", R.Sync.LastWaitMs < 0
                                      ? llvm::json::Value(nullptr)
                                      : llvm::json::Value(R.Sync.LastWaitMs));
      J.attribute("exchange_ms", R.Sync.ExchangeMs < 0
                                     ? llvm::json::Value(nullptr)
                                     : llvm::json::Value(R.Sync.ExchangeMs));
      std::vector<double> Costs;
      for (double C : R.Sync.RankCostsMs)
        if (C >= 0)
          Costs.push_back(C);
      if (Costs.empty()) {
        J.attribute("rank_cost_ms", nullptr);
      } else {
        llvm::sort(Costs);
        J.attributeObject("rank_cost_ms", [&] {
          J.attribute("ranks", int64_t(Costs.size()));
          J.attribute("min", Costs.front());
          // The upper median for an even count, a value some rank measured.
          J.attribute("median", Costs[Costs.size() / 2]);
          J.attribute("max", Costs.back());
        });
      }
      J.attributeArray("late_ranks", [&] {
        for (int Rank : R.Sync.LateRanks)
          J.value(int64_t(Rank));
      });
      J.attributeArray("missing_ranks", [&] {
        for (int Rank : R.Sync.MissingRanks)
          J.value(int64_t(Rank));
      });
      J.attribute("fallback_nodes", int64_t(R.Sync.FallbackNodes));
    });
    J.attributeArray("nodes", [&] {
      for (size_t NI = 0; NI < R.Nodes.size(); ++NI)
        J.object([&] { writeNode(J, In, NI); });
    });
    J.attributeArray("ranks", [&] {
      for (size_t Rank = 0; Rank < R.RankDecisions.size(); ++Rank) {
        if (R.RankDecisions[Rank].empty() && !R.Nodes.empty())
          continue;
        J.object([&] {
          J.attribute("rank", int64_t(Rank));
          // In decision order; keys are unique (graph and node names are).
          J.attributeObject("decisions", [&] {
            for (const auto &KV : R.RankDecisions[Rank])
              J.attribute(KV.first, KV.second);
          });
        });
      }
    });
    J.attributeObject("phases_ms", [&] {
      // A pass run twice is listed twice; a JSON key appears once, with
      // the last time.
      std::vector<std::pair<std::string, double>> Phases;
      llvm::StringMap<size_t> Index;
      auto Add = [&](std::string Name, double Ms) {
        auto [It, New] = Index.try_emplace(Name, Phases.size());
        if (New)
          Phases.emplace_back(std::move(Name), Ms);
        else
          Phases[It->second].second = Ms;
      };
      for (const auto &P : In.ExtraPhasesMs)
        Add(P.first, P.second);
      for (const auto &P : R.PhasesMs)
        Add("autotune." + P.first, P.second);
      for (const auto &P : Phases)
        J.attribute(P.first, P.second);
    });
    J.attribute("benchmarks_run", int64_t(R.BenchmarksRun));
    J.attribute("memo_hits", int64_t(R.MemoHits));
    J.attributeObject("cache", [&] {
      J.attribute("hits", int64_t(R.CacheHits));
      J.attribute("misses", int64_t(R.CacheMisses));
      J.attribute("dir",
                  R.CacheDir.empty() ? JValue(nullptr) : JValue(R.CacheDir));
    });
    if (!R.DecisionsFrom.empty())
      J.attribute("decisions_from", R.DecisionsFrom);
    // What the reporting rank's backend counted (cuda: its NVRTC work),
    // if it was created at all.
    if (!R.BackendCounters.empty())
      J.attributeObject("kernels", [&] {
        for (const auto &[Name, Count] : R.BackendCounters)
          J.attribute(Name, Count);
      });
  });
  OS << '\n';
}
