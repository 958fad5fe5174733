//===- Calibrate.cpp - Fit the simulator's device to measured times -------===//
#include "mtsched/Tools/Calibrate.h"
#include "mtsched/IR/Graph.h"
#include "mtsched/IR/Parser.h"
#include "mtsched/OpUnits/OpUnits.h"
#include "mtsched/Passes/PassRegistry.h"
#include "mtsched/Support/Diagnostics.h"
#include "mtsched/Support/FileIO.h"
#include "mtsched/Tools/RankPipeline.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <cmath>
#include <map>

using namespace mtsched;

static llvm::Error bad(const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Msg);
}

namespace {

/// One step of a path into a JSON document: an object key or an array
/// index.
struct JsonStep {
  std::string Key;
  size_t Index = 0;
  bool IsKey = true;
  JsonStep(llvm::StringRef K) : Key(K.str()) {}
  JsonStep(size_t I) : Index(I), IsKey(false) {}
};

/// A bad value in a report: what is wrong with it and where it is, so that
/// loadCalibrationSamples, which has the text, can say FILE:LINE:COL.
class ReportValueError : public llvm::ErrorInfo<ReportValueError> {
public:
  static char ID;
  ReportValueError(std::vector<JsonStep> Path, std::string Msg)
      : Path(std::move(Path)), Msg(std::move(Msg)) {}
  void log(llvm::raw_ostream &OS) const override { OS << Msg; }
  std::error_code convertToErrorCode() const override {
    return llvm::inconvertibleErrorCode();
  }
  std::vector<JsonStep> Path;
  std::string Msg;
};
char ReportValueError::ID;

/// Finds the text of the value at a path in a JSON document that
/// llvm::json::parse accepted. llvm::json::Value keeps no positions, so
/// this scans the text again; the scan need not validate, only skip.
class JsonLocator {
public:
  explicit JsonLocator(llvm::StringRef Text) : Text(Text) {}

  /// The offset of the value at Path, if the scan finds it.
  std::optional<size_t> find(llvm::ArrayRef<JsonStep> Path) {
    Pos = 0;
    skipSpace();
    for (const JsonStep &S : Path) {
      if (!(S.IsKey ? enterKey(S.Key) : enterIndex(S.Index)))
        return std::nullopt;
      skipSpace();
    }
    return Pos;
  }

private:
  bool at(char C) const { return Pos < Text.size() && Text[Pos] == C; }
  void skipSpace() {
    while (Pos < Text.size() && llvm::StringRef(" \t\r\n").contains(Text[Pos]))
      ++Pos;
  }
  /// Skips a string at Pos; returns its raw text between the quotes.
  std::optional<llvm::StringRef> skipString() {
    if (!at('"'))
      return std::nullopt;
    size_t Begin = ++Pos;
    while (Pos < Text.size() && Text[Pos] != '"')
      Pos += Text[Pos] == '\\' ? 2 : 1;
    if (Pos >= Text.size())
      return std::nullopt;
    return Text.slice(Begin, Pos++);
  }
  bool skipValue() {
    skipSpace();
    if (at('"'))
      return skipString().has_value();
    if (at('{') || at('[')) {
      char Close = at('{') ? '}' : ']';
      ++Pos;
      skipSpace();
      if (at(Close))
        return ++Pos, true;
      while (true) {
        if (Close == '}') {
          skipSpace();
          if (!skipString())
            return false;
          skipSpace();
          if (!at(':'))
            return false;
          ++Pos;
        }
        if (!skipValue())
          return false;
        skipSpace();
        if (at(Close))
          return ++Pos, true;
        if (!at(','))
          return false;
        ++Pos;
      }
    }
    // A number or a literal.
    size_t Begin = Pos;
    while (Pos < Text.size() &&
           !llvm::StringRef(",]} \t\r\n").contains(Text[Pos]))
      ++Pos;
    return Pos > Begin;
  }
  /// Moves from an object at Pos to the value of its member Key (the last
  /// one, as llvm::json keeps it, if there are several).
  bool enterKey(llvm::StringRef Key) {
    if (!at('{'))
      return false;
    ++Pos;
    std::optional<size_t> Found;
    while (true) {
      skipSpace();
      if (at('}'))
        break;
      std::optional<llvm::StringRef> K = skipString();
      if (!K)
        return false;
      skipSpace();
      if (!at(':'))
        return false;
      ++Pos;
      skipSpace();
      if (*K == Key)
        Found = Pos;
      if (!skipValue())
        return false;
      skipSpace();
      if (at(','))
        ++Pos;
    }
    if (!Found)
      return false;
    Pos = *Found;
    return true;
  }
  bool enterIndex(size_t Index) {
    if (!at('['))
      return false;
    ++Pos;
    for (size_t I = 0; I < Index; ++I) {
      if (!skipValue())
        return false;
      skipSpace();
      if (!at(','))
        return false;
      ++Pos;
    }
    skipSpace();
    return !at(']');
  }

  llvm::StringRef Text;
  size_t Pos = 0;
};

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

namespace {
// The fitted parameters are the device description's numeric fields.
const llvm::ArrayRef<DeviceField> Params = deviceNumericFields();
const size_t NumParams = Params.size();
} // namespace

std::vector<std::string> mtsched::calibratedParameterNames() {
  std::vector<std::string> Out;
  for (const DeviceField &P : Params)
    Out.push_back(P.Key.str());
  return Out;
}

double mtsched::predictSampleUs(const DeviceDesc &D,
                                const CalibrationSample &S) {
  switch (S.K) {
  case CalibrationSample::Kind::Choice:
    return predictChoiceUs(D, S.W, S.C, false);
  case CalibrationSample::Kind::Fused:
    return predictChoiceUs(D, S.W, S.C, true);
  case CalibrationSample::Kind::Epilogue:
    return predictEpilogueUs(D, S.W);
  }
  return 0;
}

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

llvm::Expected<std::vector<CalibrationSample>> mtsched::loadCalibrationSamples(
    llvm::StringRef IRPath, llvm::StringRef ReportPath,
    const LoweringOptions &Lowering, const FusionOptions &Fusion) {
  registerAllOpUnits();
  // A report grows with its graph, so it has the IR input's limit.
  auto Rep = readBoundedFile(ReportPath, MaxIRFileBytes, "a report");
  if (!Rep)
    return bad("cannot read report '" + ReportPath +
               "': " + llvm::toString(Rep.takeError()));
  llvm::Expected<llvm::json::Value> Report =
      llvm::json::parse((*Rep)->getBuffer());
  if (!Report)
    return bad(ReportPath +
               ": invalid JSON: " + llvm::toString(Report.takeError()));
  // FILE:LINE:COL for a bad value, FILE alone for what has no one place.
  llvm::StringRef Text = (*Rep)->getBuffer();
  auto InReport = [&](llvm::Error E) {
    std::string Where = ReportPath.str();
    std::string Msg;
    llvm::handleAllErrors(
        std::move(E),
        [&](const ReportValueError &V) {
          Msg = V.Msg;
          if (std::optional<size_t> Off = JsonLocator(Text).find(V.Path)) {
            llvm::StringRef Before = Text.take_front(*Off);
            size_t LineStart = Before.rfind('\n') + 1; // npos + 1 == 0
            Where += ":" + std::to_string(Before.count('\n') + 1) + ":" +
                     std::to_string(*Off - LineStart + 1);
          }
        },
        [&](const llvm::ErrorInfoBase &Other) { Msg = Other.message(); });
    return bad(Where + ": " + Msg);
  };
  if (IRPath.empty()) {
    llvm::Expected<std::vector<CalibrationSample>> S =
        collectCalibrationSamples(nullptr, *Report);
    if (!S)
      return InReport(S.takeError());
    return S;
  }
  auto IR = readBoundedFile(IRPath, MaxIRFileBytes, "an IR input");
  if (!IR)
    return bad("cannot read IR file '" + IRPath +
               "': " + llvm::toString(IR.takeError()));
  llvm::SourceMgr SM;
  SM.AddNewSourceBuffer(std::move(*IR), llvm::SMLoc());
  std::unique_ptr<Module> M = parseModule(SM);
  if (!M)
    return bad("cannot parse IR file '" + IRPath + "'");
  Diagnostics Diags(SM);
  PassContext Ctx;
  Ctx.M = M.get();
  Ctx.Diags = &Diags;
  LoweringOptions L = Lowering;
  // Decisions are not needed, only the workloads.
  L.Mode = CollectiveMode::Deferred;
  // The default pipeline's passes before `autotune`, as the driver runs
  // them (the report may time SwiGLU's merged alternatives, which
  // fuse-swiglu adds).
  PassRegistry Registry;
  registerPipelinePasses(Registry, L, Fusion, /*Session=*/nullptr);
  std::vector<std::unique_ptr<Pass>> Passes;
  for (const char *Name : defaultPipelineBeforeAutotune())
    Passes.push_back(Registry.lookup(Name)->Factory());
  for (auto &G : M->getGraphs())
    for (auto &P : Passes) {
      P->setContext(Ctx);
      if (llvm::Error E = P->run(*G)) {
        llvm::consumeError(std::move(E));
        return bad("cannot lower IR file '" + IRPath + "'");
      }
    }
  llvm::Expected<std::vector<CalibrationSample>> S =
      collectCalibrationSamples(M.get(), *Report);
  if (!S)
    return InReport(S.takeError());
  return S;
}

namespace {

/// Mean squared relative error of the samples on a device whose fitted
/// parameters are Start's times exp(X).
class Objective {
public:
  Objective(const DeviceDesc &Start,
            const std::vector<CalibrationSample> &Samples,
            const std::vector<size_t> &Free)
      : Start(Start), Samples(Samples), Free(Free) {}

  DeviceDesc device(const std::vector<double> &X) const {
    DeviceDesc D = Start;
    for (size_t I = 0; I < Free.size(); ++I)
      D.*Params[Free[I]].Member =
          Start.*Params[Free[I]].Member * std::exp(X[I]);
    return D;
  }
  double operator()(const std::vector<double> &X) {
    ++Evaluations;
    DeviceDesc D = device(X);
    double Sum = 0;
    for (const CalibrationSample &S : Samples) {
      double P = predictSampleUs(D, S);
      double E = std::isfinite(P) ? (P - S.MeasuredUs) / S.MeasuredUs : 10.0;
      Sum += E * E;
    }
    return Sum / Samples.size();
  }
  unsigned Evaluations = 0;

private:
  const DeviceDesc &Start;
  const std::vector<CalibrationSample> &Samples;
  const std::vector<size_t> &Free;
};

/// Nelder-Mead from X0 with initial step Step; returns the best point.
std::vector<double> nelderMead(Objective &F, std::vector<double> X0,
                               double Step, unsigned MaxIter) {
  size_t N = X0.size();
  std::vector<std::vector<double>> P(N + 1, X0);
  for (size_t I = 0; I < N; ++I)
    P[I + 1][I] += Step;
  std::vector<double> V(N + 1);
  for (size_t I = 0; I <= N; ++I)
    V[I] = F(P[I]);
  for (unsigned It = 0; It < MaxIter; ++It) {
    std::vector<size_t> Order(N + 1);
    for (size_t I = 0; I <= N; ++I)
      Order[I] = I;
    std::sort(Order.begin(), Order.end(), [&](size_t A, size_t B) {
      return V[A] < V[B] || (V[A] == V[B] && A < B);
    });
    size_t Best = Order[0], Worst = Order[N], Second = Order[N - 1];
    if (V[Worst] - V[Best] <= 1e-14 * (1 + V[Best]))
      break;
    std::vector<double> C(N, 0);
    for (size_t I = 0; I <= N; ++I)
      if (I != Worst)
        for (size_t J = 0; J < N; ++J)
          C[J] += P[I][J] / N;
    auto Along = [&](double T) {
      std::vector<double> X(N);
      for (size_t J = 0; J < N; ++J)
        X[J] = C[J] + T * (P[Worst][J] - C[J]);
      return X;
    };
    std::vector<double> R = Along(-1);
    double FR = F(R);
    if (FR < V[Best]) {
      std::vector<double> E = Along(-2);
      double FE = F(E);
      if (FE < FR) {
        P[Worst] = E;
        V[Worst] = FE;
      } else {
        P[Worst] = R;
        V[Worst] = FR;
      }
    } else if (FR < V[Second]) {
      P[Worst] = R;
      V[Worst] = FR;
    } else {
      std::vector<double> K = FR < V[Worst] ? Along(-0.5) : Along(0.5);
      double FK = F(K);
      if (FK < std::min(FR, V[Worst])) {
        P[Worst] = K;
        V[Worst] = FK;
      } else {
        for (size_t I = 0; I <= N; ++I)
          if (I != Best) {
            for (size_t J = 0; J < N; ++J)
              P[I][J] = P[Best][J] + 0.5 * (P[I][J] - P[Best][J]);
            V[I] = F(P[I]);
          }
      }
    }
  }
  size_t Best = 0;
  for (size_t I = 1; I <= N; ++I)
    if (V[I] < V[Best])
      Best = I;
  return P[Best];
}

void errorsInto(const DeviceDesc &D,
                const std::vector<CalibrationSample> &Samples, bool After,
                std::map<std::string, CalibrationError> &Groups) {
  for (const CalibrationSample &S : Samples) {
    CalibrationError &G = Groups[S.Group];
    G.Group = S.Group;
    double P = predictSampleUs(D, S);
    double E =
        std::isfinite(P) ? std::fabs(P - S.MeasuredUs) / S.MeasuredUs : 1e9;
    double &Rms = After ? G.RmsAfter : G.RmsBefore;
    double &Max = After ? G.MaxAfter : G.MaxBefore;
    Rms += E * E;
    Max = std::max(Max, E);
    if (After)
      ++G.Count;
  }
}

} // namespace

CalibrationResult
mtsched::calibrateDevice(const DeviceDesc &Start,
                         const std::vector<CalibrationSample> &Samples,
                         llvm::StringRef Name) {
  CalibrationResult R;
  // A parameter is free when moving it by 20% moves some prediction by
  // more than 0.1%.
  std::vector<size_t> Free;
  for (size_t I = 0; I < NumParams; ++I) {
    DeviceDesc Up = Start;
    Up.*Params[I].Member *= 1.2;
    bool Moves = false;
    for (const CalibrationSample &S : Samples) {
      double A = predictSampleUs(Start, S), B = predictSampleUs(Up, S);
      if (std::isfinite(A) != std::isfinite(B) ||
          (std::isfinite(A) && std::fabs(B - A) > 1e-3 * A)) {
        Moves = true;
        break;
      }
    }
    if (Moves)
      Free.push_back(I);
    else
      R.Undetermined.push_back(Params[I].Key.str());
  }
  Objective F(Start, Samples, Free);
  std::vector<double> X(Free.size(), 0.0);
  R.ObjectiveBefore = F(X);
  double Best = R.ObjectiveBefore;
  // Restart from the best point with a shrinking simplex until a restart
  // stops improving: Nelder-Mead can stall on the roofline's kinks.
  double Step = 0.5;
  for (unsigned Round = 0; Round < 12 && !Free.empty(); ++Round) {
    std::vector<double> Y = nelderMead(F, X, Step, 3000);
    double FY = F(Y);
    bool Improved = FY < Best * (1 - 1e-9);
    if (FY < Best) {
      Best = FY;
      X = Y;
    }
    if (!Improved && Step < 0.02)
      break;
    Step = Improved ? std::max(Step * 0.5, 0.05) : Step * 0.3;
  }
  R.Fitted = F.device(X);
  R.Fitted.Name = Name.str();
  R.ObjectiveAfter = Best;
  R.Evaluations = F.Evaluations;

  std::map<std::string, CalibrationError> Groups;
  errorsInto(Start, Samples, false, Groups);
  errorsInto(R.Fitted, Samples, true, Groups);
  for (auto &KV : Groups) {
    CalibrationError E = KV.second;
    E.RmsBefore = std::sqrt(E.RmsBefore / E.Count);
    E.RmsAfter = std::sqrt(E.RmsAfter / E.Count);
    R.Errors.push_back(E);
  }
  return R;
}

void mtsched::printCalibration(const DeviceDesc &Start,
                               const CalibrationResult &R,
                               llvm::raw_ostream &OS) {
  OS << "parameter            start       fitted\n";
  for (const DeviceField &P : Params) {
    bool Fixed = llvm::is_contained(R.Undetermined, P.Key);
    OS << llvm::format("%-18s %10.4g %12.4g", P.Key.data(), Start.*P.Member,
                       R.Fitted.*P.Member)
       << (Fixed ? "  (not determined by these timings: kept)" : "") << '\n';
  }
  OS << llvm::format("%-18s %10d %12d  (kept)\n",
                     static_cast<const char *>("num_sms"), Start.NumSMs,
                     R.Fitted.NumSMs)
     << llvm::format("%-18s %10.4g %12.4g  (kept)\n",
                     static_cast<const char *>("l2_mb"), Start.L2MB,
                     R.Fitted.L2MB);
  OS << "\nrelative error per choice kind (rms / max, %):\n"
     << "kind                                samples   before            "
        "after\n";
  for (const CalibrationError &E : R.Errors)
    OS << llvm::format("%-35s %7u %7.2f / %7.2f %7.2f / %7.2f\n",
                       E.Group.c_str(), E.Count, 100 * E.RmsBefore,
                       100 * E.MaxBefore, 100 * E.RmsAfter, 100 * E.MaxAfter);
  OS << llvm::format("\nobjective (mean squared relative error): %.3g -> "
                     "%.3g after %u evaluations\n",
                     R.ObjectiveBefore, R.ObjectiveAfter, R.Evaluations);
}
