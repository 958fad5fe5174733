//===- CalibrateSamples.cpp - A report's measured times as samples --------===//
//
// Pairs every measured time of a --report JSON with the workload and
// choice it belongs to (from the IR when there is one, else from the
// report's own `workload` and `params`), checking each time on the way.
//
//===----------------------------------------------------------------------===//
#include "CalibrateImpl.h"
#include "mtsched/IR/Graph.h"
#include "mtsched/Tools/Calibrate.h"
#include "llvm/Support/raw_ostream.h"
#include <cmath>

using namespace mtsched;
using namespace mtsched::detail;

namespace {

/// A time of the report in ms: a positive number (or, where Zero allows,
/// 0), or null for a choice that has none. Anything else is an error at
/// Path.
llvm::Expected<std::optional<double>>
readReportMs(const llvm::json::Object &O, llvm::StringRef Key, bool AllowZero,
             std::vector<JsonStep> Path, const llvm::Twine &Whose) {
  const llvm::json::Value *V = O.get(Key);
  if (!V || V->kind() == llvm::json::Value::Null)
    return std::nullopt;
  Path.emplace_back(Key);
  std::optional<double> Ms = V->getAsNumber();
  if (!Ms)
    return llvm::make_error<ReportValueError>(
        std::move(Path),
        ("'" + Key + "' of " + Whose + " is not a number or null").str());
  if (!std::isfinite(*Ms) || *Ms < 0 || (*Ms == 0 && !AllowZero)) {
    std::string Num; // as the report wrote it
    llvm::raw_string_ostream(Num) << *V;
    return llvm::make_error<ReportValueError>(
        std::move(Path),
        ("'" + Key + "' of " + Whose + " is " + Num +
         ": a measured time must be " + (AllowZero ? "at least 0" : "positive"))
            .str());
  }
  return Ms;
}

} // namespace

static std::string groupOf(const Workload &W, const Choice &C, bool Fused) {
  std::string G;
  switch (W.K) {
  case Workload::Kind::Gemm:
    G = C.isExtern() ? "extern gemm" : "gemm tiles";
    break;
  case Workload::Kind::Collective: {
    std::optional<CollectiveAlgo> A = collectiveAlgoOf(C);
    G = "collective " + (A ? collectiveAlgoName(*A).str() : C.Name);
    break;
  }
  case Workload::Kind::SwiGlu:
    G = "swiglu tiles";
    break;
  case Workload::Kind::Attention:
    if (std::optional<AttentionTile> T = attentionTileOf(C))
      G = T->Mma ? "attention mma tiles" : "attention flash tiles";
    else
      G = "attention math";
    break;
  case Workload::Kind::Custom:
    G = "custom";
    break;
  case Workload::Kind::OpUnit:
    G = C.isExtern() ? "op unit extern" : "op unit kernels";
    break;
  }
  return Fused ? G + " + epilogue" : G;
}

/// A node's `workload` as writeReport wrote it.
static llvm::Expected<Workload> readWorkload(const llvm::json::Object &O,
                                             llvm::StringRef NodeName) {
  auto Bad = [&](llvm::StringRef What) {
    return bad("the workload of '" + NodeName + "' has " + What);
  };
  Workload W;
  llvm::StringRef Kind = O.getString("kind").value_or("");
  std::optional<Workload::Kind> K = parseWorkloadKind(Kind);
  if (!K)
    return Bad("an unknown kind '" + Kind.str() + "'");
  W.K = *K;
  if (const llvm::json::Object *A = O.getObject("attention")) {
    AttentionShape &S = W.Attn;
    S.B = A->getInteger("b").value_or(0);
    S.Hq = A->getInteger("hq").value_or(0);
    S.Hkv = A->getInteger("hkv").value_or(0);
    S.Sq = A->getInteger("sq").value_or(0);
    S.Skv = A->getInteger("skv").value_or(0);
    S.D = A->getInteger("d").value_or(0);
    S.Causal = A->getBoolean("causal").value_or(false);
    S.Scale = A->getNumber("scale").value_or(1);
    if (std::optional<llvm::StringRef> T = A->getString("dtype")) {
      std::optional<DType> D = parseDType(*T);
      if (!D)
        return Bad("an unknown attention dtype '" + T->str() + "'");
      S.Dtype = *D;
    }
  }
  W.Gemm.Batch = O.getInteger("batch").value_or(1);
  W.Gemm.M = O.getInteger("m").value_or(0);
  W.Gemm.N = O.getInteger("n").value_or(0);
  W.Gemm.K = O.getInteger("k").value_or(0);
  if (std::optional<llvm::StringRef> T = O.getString("dtype")) {
    std::optional<DType> D = parseDType(*T);
    if (!D)
      return Bad("an unknown dtype '" + T->str() + "'");
    W.Gemm.Dtype = *D;
  }
  if (std::optional<llvm::StringRef> C = O.getString("collective")) {
    std::optional<CollectiveKind> K = parseCollectiveKind(*C);
    if (!K)
      return Bad("an unknown collective '" + C->str() + "'");
    W.Collective = *K;
  }
  W.Bytes = O.getInteger("bytes").value_or(0);
  W.Ranks = int(O.getInteger("ranks").value_or(1));
  W.InBytes = O.getInteger("in_bytes").value_or(0);
  W.OutBytes = O.getInteger("out_bytes").value_or(0);
  if (const llvm::json::Object *E = O.getObject("epilogue")) {
    W.Epilogue.NumOps = int(E->getInteger("ops").value_or(0));
    W.Epilogue.Elements = E->getInteger("elements").value_or(0);
    W.Epilogue.ExtraInputBytes = E->getInteger("extra_input_bytes").value_or(0);
    if (std::optional<llvm::StringRef> T = E->getString("dtype")) {
      std::optional<DType> D = parseDType(*T);
      if (!D)
        return Bad("an unknown epilogue dtype '" + T->str() + "'");
      W.Epilogue.Dtype = *D;
    }
    W.Epilogue.FlopsPerElement = E->getNumber("flops_per_element").value_or(0);
    W.Epilogue.RowReduction = E->getBoolean("row_reduction").value_or(false);
    W.Epilogue.ExtraWrites = int(E->getInteger("extra_writes").value_or(0));
  }
  return W;
}

/// A choice's `params` back as attributes (what the cost model reads:
/// `algo`, `cost_us`, ...).
static std::optional<Attribute> readAttribute(const llvm::json::Value &V) {
  if (std::optional<int64_t> I = V.getAsInteger())
    return Attribute::getInt(*I);
  if (std::optional<double> D = V.getAsNumber())
    return Attribute::getFloat(*D);
  if (std::optional<llvm::StringRef> S = V.getAsString())
    return Attribute::getString(*S);
  if (std::optional<bool> B = V.getAsBoolean())
    return Attribute::getBool(*B);
  if (const llvm::json::Array *A = V.getAsArray()) {
    std::vector<Attribute> Elements;
    for (const llvm::json::Value &E : *A) {
      std::optional<Attribute> X = readAttribute(E);
      if (!X)
        return std::nullopt;
      Elements.push_back(std::move(*X));
    }
    return Attribute::getList(std::move(Elements));
  }
  return std::nullopt;
}

llvm::Expected<std::vector<CalibrationSample>>
mtsched::collectCalibrationSamples(const Module *M,
                                   const llvm::json::Value &Report) {
  const llvm::json::Object *R = Report.getAsObject();
  const llvm::json::Array *Nodes = R ? R->getArray("nodes") : nullptr;
  if (!Nodes)
    return bad("the report has no 'nodes' list");
  std::vector<CalibrationSample> Out;
  for (size_t NI = 0; NI < Nodes->size(); ++NI) {
    const llvm::json::Value &NV = (*Nodes)[NI];
    const llvm::json::Object *NO = NV.getAsObject();
    if (!NO)
      return bad("a node of the report is not an object");
    llvm::StringRef GraphName = NO->getString("graph").value_or("");
    llvm::StringRef NodeName = NO->getString("name").value_or("");
    if (NO->getBoolean("fallback").value_or(false))
      continue;
    // The lowered IR's workload when an IR is given (it is checked against
    // the report), else the report's own.
    const MultiTemplateBufferNode *N = nullptr;
    Workload W;
    const llvm::json::Object *WO = NO->getObject("workload");
    if (!M && WO) {
      llvm::Expected<Workload> RW = readWorkload(*WO, NodeName);
      if (!RW)
        return RW.takeError();
      W = *RW;
      // An op unit's choices are priced from its node (IR/OpUnit.h), which
      // a report does not hold: left out unless the IR file is given.
      if (W.K == Workload::Kind::OpUnit)
        continue;
    } else {
      if (!M)
        return bad("node '" + NodeName +
                   "' has no workload (a report of an older mtsched): give "
                   "the IR file of the run");
      const Graph *G = nullptr;
      for (const auto &Cand : M->getGraphs())
        if ("@" + Cand->getName() == GraphName)
          G = Cand.get();
      if (!G)
        return bad("the report's graph '" + GraphName +
                   "' is not in the IR file");
      for (const auto &Cand : G->getNodes())
        if ("%" + Cand->getName() == NodeName)
          N = llvm::dyn_cast<MultiTemplateBufferNode>(Cand.get());
      if (!N)
        return bad("the report's node '" + NodeName + "' of '" + GraphName +
                   "' is not a multi-template buffer of the lowered IR");
      W = describeNode(*M, *G, *N);
    }
    const llvm::json::Array *Choices = NO->getArray("choices");
    if (!Choices)
      return bad("node '" + NodeName + "' has no 'choices'");
    bool AnyPredicted = false;
    for (size_t CI = 0; CI < Choices->size(); ++CI) {
      const llvm::json::Object *CO = (*Choices)[CI].getAsObject();
      if (!CO)
        return bad("a choice of '" + NodeName + "' is not an object");
      llvm::StringRef Name = CO->getString("name").value_or("");
      Choice FromReport;
      const Choice *C = nullptr;
      if (!N) {
        FromReport.Name = Name.str();
        if (const llvm::json::Object *PO = CO->getObject("params"))
          for (const auto &KV : *PO) {
            std::optional<Attribute> A = readAttribute(KV.second);
            if (!A)
              return bad("choice '" + Name + "' of '" + NodeName +
                         "' has a parameter '" + KV.first.str() +
                         "' that is not a number, string, bool or list");
            FromReport.Params.set(KV.first.str(), std::move(*A));
          }
        C = &FromReport;
      } else if (!(C = N->findChoice(Name))) {
        return bad("choice '" + Name + "' of '" + NodeName +
                   "' is not in the lowered IR (run with the same choice "
                   "options)");
      }
      std::string What = (GraphName + "/" + NodeName + " " + Name).str();
      // A negative or zero time would fit a device with a negative or
      // infinite parameter, which --device then rejects.
      std::vector<JsonStep> At{JsonStep("nodes"), JsonStep(NI),
                               JsonStep("choices"), JsonStep(CI)};
      std::string Whose = ("choice '" + Name + "' of '" + NodeName + "'").str();
      llvm::Expected<std::optional<double>> Ms =
          readReportMs(*CO, "ms", /*AllowZero=*/false, At, Whose);
      if (!Ms)
        return Ms.takeError();
      if (*Ms)
        Out.push_back({CalibrationSample::Kind::Choice, groupOf(W, *C, false),
                       What, W, *C, **Ms * 1000.0});
      bool Predicted = CO->getBoolean("fused_predicted").value_or(false);
      AnyPredicted |= Predicted;
      llvm::Expected<std::optional<double>> FusedMs =
          readReportMs(*CO, "fused_ms", /*AllowZero=*/false, At, Whose);
      if (!FusedMs)
        return FusedMs.takeError();
      if (*FusedMs && !Predicted)
        Out.push_back({CalibrationSample::Kind::Fused, groupOf(W, *C, true),
                       What + " fused", W, *C, **FusedMs * 1000.0});
    }
    // The cost-model heuristic predicts the epilogue too. 0: no epilogue.
    llvm::Expected<std::optional<double>> EpiMs = readReportMs(
        *NO, "epilogue_ms", /*AllowZero=*/true,
        {JsonStep("nodes"), JsonStep(NI)}, ("'" + NodeName + "'").str());
    if (!EpiMs)
      return EpiMs.takeError();
    if (*EpiMs && !AnyPredicted && W.Epilogue.NumOps > 0 && **EpiMs > 0)
      Out.push_back({CalibrationSample::Kind::Epilogue, "epilogues",
                     (GraphName + "/" + NodeName + " epilogue").str(), W,
                     Choice(), **EpiMs * 1000.0});
  }
  if (Out.empty())
    return bad("the report holds no measured times to calibrate from");
  return Out;
}
