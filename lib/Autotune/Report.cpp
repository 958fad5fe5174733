//===- Report.cpp ---------------------------------------------------------===//
#include "mtsched/Autotune/Report.h"
#include "mtsched/Runtime/CudaCompiler.h"
#include <cmath>

using namespace mtsched;
using llvm::json::Array;
using llvm::json::Object;
using JValue = llvm::json::Value;

/// Microseconds as milliseconds, null when not finite.
static JValue ms(double Us) {
  if (!std::isfinite(Us))
    return nullptr;
  return Us / 1000.0;
}

llvm::json::Value mtsched::buildReport(const ReportInput &In) {
  const RunResult &R = *In.Result;
  Array Nodes;
  for (size_t NI = 0; NI < R.Nodes.size(); ++NI) {
    const NodeResult &N = R.Nodes[NI];
    Array Choices;
    for (size_t CI = 0; CI < N.Choices.size(); ++CI) {
      const ChoiceResult &C = N.Choices[CI];
      Array RankMs;
      for (int Rank = 0; Rank < In.WorldSize; ++Rank) {
        bool Known = Rank < int(R.RankLocalUs.size()) &&
                     NI < R.RankLocalUs[Rank].size() &&
                     CI < R.RankLocalUs[Rank][NI].size();
        RankMs.push_back(Known ? ms(R.RankLocalUs[Rank][NI][CI])
                               : JValue(nullptr));
      }
      Object CO{{"name", C.Name},
                {"ms", ms(C.Us)},
                {"rank_ms", std::move(RankMs)},
                {"fused_ms", ms(C.FusedUs)},
                {"status", choiceStatusName(C.Status)}};
      if (std::isfinite(C.FusedUs))
        CO["fused_predicted"] = C.FusedPredicted;
      if (!C.Message.empty())
        CO["message"] = C.Message;
      Choices.push_back(std::move(CO));
    }
    Array Epilogue;
    for (const std::string &E : N.Epilogue)
      Epilogue.push_back(E);
    Object NO{{"graph", "@" + N.Graph},
              {"name", N.Name},
              {"kind", N.Kind},
              {"op", N.Op},
              {"group", N.Group.empty() ? JValue(nullptr) : JValue(N.Group)},
              {"choices", std::move(Choices)},
              {"chosen", N.Chosen},
              {"epilogue", std::move(Epilogue)},
              {"epilogue_fused", N.EpilogueFused},
              {"fallback", N.Fallback},
              {"timed_by", Array(N.TimedBy)}};
    if (!N.Epilogue.empty())
      NO["epilogue_ms"] = ms(N.EpilogueUs);
    if (!N.Dispatch.empty()) {
      Array D;
      for (const DispatchEntry &E : N.Dispatch)
        D.push_back(Object{{"hint", E.Hint}, {"choice", E.Choice}});
      NO["dispatch"] = std::move(D);
    }
    Nodes.push_back(std::move(NO));
  }

  Array Ranks;
  for (size_t Rank = 0; Rank < R.RankDecisions.size(); ++Rank) {
    if (R.RankDecisions[Rank].empty() && !R.Nodes.empty())
      continue;
    Object D;
    for (const auto &KV : R.RankDecisions[Rank])
      D[KV.first] = KV.second;
    Ranks.push_back(
        Object{{"rank", int64_t(Rank)}, {"decisions", std::move(D)}});
  }

  Object Phases;
  for (const auto &P : In.ExtraPhasesMs)
    Phases[P.first] = P.second;
  for (const auto &P : R.PhasesMs)
    Phases["autotune." + P.first] = P.second;

  Object Out{
      {"version", 1},
      {"backend", In.Backend},
      {"world_size", In.WorldSize},
      {"mode", collectiveModeName(In.Mode)},
      {"sync", Object{{"count", int64_t(R.Sync.Count)},
                      {"ok", R.Sync.Ok},
                      {"ms", R.Sync.Ms},
                      {"reason", R.Sync.Reason}}},
      {"nodes", std::move(Nodes)},
      {"ranks", std::move(Ranks)},
      {"phases_ms", std::move(Phases)},
      {"benchmarks_run", int64_t(R.BenchmarksRun)},
      {"memo_hits", int64_t(R.MemoHits)},
      {"cache", Object{{"hits", int64_t(R.CacheHits)},
                       {"misses", int64_t(R.CacheMisses)},
                       {"dir", R.CacheDir.empty() ? JValue(nullptr)
                                                  : JValue(R.CacheDir)}}},
  };
  if (In.Backend == "cuda") {
    // NVRTC work of this process: compiled now or read from the cache.
    const cuda::KernelStats &K = cuda::kernelStats();
    Out["kernels"] = Object{{"compiled", int64_t(K.Compiled.load())},
                            {"cached", int64_t(K.Cached.load())},
                            {"failed", int64_t(K.Failed.load())},
                            {"compile_ms", int64_t(K.CompileMs.load())}};
  }
  return Out;
}
