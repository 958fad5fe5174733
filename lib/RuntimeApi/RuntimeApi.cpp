//===- RuntimeApi.cpp - libmtsched_runtime: decided graphs from C ---------===//
//
// The C API of include/mtsched/RuntimeApi/mtsched_runtime.h over the IR,
// the fp64 interpreter ("cpu") and the backend registry's PrepareGraph hook
// ("cuda"): no backend's headers are included here, so the library stays at
// the tools' level of the layering.
//
//===----------------------------------------------------------------------===//
#include "mtsched/Backend/Backends.h"
#include "mtsched/IR/Parser.h"
#include "mtsched/IR/Verifier.h"
#include "mtsched/OpUnits/OpUnits.h"
#include "mtsched/Reference/Interpreter.h"
#include "mtsched/Reference/Npy.h"
#include "mtsched/RuntimeApi/mtsched_runtime.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

using namespace mtsched;

struct mtsched_module {
  llvm::SourceMgr SM;
  std::unique_ptr<Module> M;
  /// mtsched_module_set_ranks: this process's rank, the world's size and
  /// the communicator's id (empty at world size 1).
  int Rank = 0;
  int WorldSize = 1;
  std::string CommId;
};

struct mtsched_graph {
  const Graph *G = nullptr;
  bool OnCpu = true;
  std::vector<const Value *> Inputs;
  std::vector<const Value *> Outputs;
  /// "cuda": the backend's prepared graph.
  std::unique_ptr<PreparedGraph> Prepared;
  /// Runs that succeeded (mtsched_graph_stat's "runs").
  int64_t Runs = 0;
};

namespace {

/// Hands Msg to the caller as a malloc'ed string (mtsched_free_error
/// releases it), if the caller asked for one.
void setError(char **Error, const std::string &Msg) {
  if (!Error)
    return;
  *Error = static_cast<char *>(std::malloc(Msg.size() + 1));
  if (*Error)
    std::memcpy(*Error, Msg.c_str(), Msg.size() + 1);
}

/// Collects the source manager's diagnostics as text (file:line:col:
/// error: ...) instead of printing them: a library must not write to the
/// caller's stderr.
void collectDiagnostics(const llvm::SMDiagnostic &D, void *Ctx) {
  std::string &Out = *static_cast<std::string *>(Ctx);
  llvm::raw_string_ostream OS(Out);
  D.print(nullptr, OS, /*ShowColors=*/false);
}

std::optional<mtsched_dtype> toCDType(DType T) {
  switch (T) {
  case DType::F32:
    return MTSCHED_F32;
  case DType::F16:
    return MTSCHED_F16;
  case DType::BF16:
    return MTSCHED_BF16;
  case DType::I32:
    return MTSCHED_I32;
  case DType::I64:
    return MTSCHED_I64;
  case DType::F8E4M3:
    return MTSCHED_F8E4M3;
  case DType::F8E5M2:
    return MTSCHED_F8E5M2;
  case DType::Bool:
    return MTSCHED_BOOL;
  }
  return std::nullopt;
}

/// Input V's elements from the caller's host buffer, as the interpreter
/// holds them (floats as doubles, integers and booleans as int64_t).
HostValues readHost(const Value &V, const void *Buf) {
  const TensorType &T = V.getType();
  size_t N = T.numElements();
  if (!isFloatDType(T.Dtype)) {
    std::vector<int64_t> I(N);
    for (size_t K = 0; K < N; ++K) {
      switch (T.Dtype) {
      case DType::I32:
        I[K] = static_cast<const int32_t *>(Buf)[K];
        break;
      case DType::I64:
        I[K] = static_cast<const int64_t *>(Buf)[K];
        break;
      default: // Bool: any nonzero byte is true.
        I[K] = static_cast<const uint8_t *>(Buf)[K] != 0;
        break;
      }
    }
    return HostValues(std::move(I));
  }
  std::vector<double> F(N);
  for (size_t K = 0; K < N; ++K) {
    switch (T.Dtype) {
    case DType::F32:
      F[K] = static_cast<const float *>(Buf)[K];
      break;
    case DType::F16:
      F[K] = f16ToFloat(static_cast<const uint16_t *>(Buf)[K]);
      break;
    case DType::BF16:
      F[K] = bf16ToFloat(static_cast<const uint16_t *>(Buf)[K]);
      break;
    default: // fp8
      F[K] = f8ToFloat(static_cast<const uint8_t *>(Buf)[K], T.Dtype);
      break;
    }
  }
  return HostValues(std::move(F));
}

/// Writes output V's values into the caller's host buffer, rounded to
/// its element type.
void writeHost(const Value &V, const HostValues &H, void *Buf) {
  const TensorType &T = V.getType();
  size_t N = T.numElements();
  for (size_t K = 0; K < N; ++K) {
    switch (T.Dtype) {
    case DType::F32:
      static_cast<float *>(Buf)[K] = float(H.getDouble(K));
      break;
    case DType::F16:
      static_cast<uint16_t *>(Buf)[K] = floatToF16(float(H.getDouble(K)));
      break;
    case DType::BF16:
      static_cast<uint16_t *>(Buf)[K] = floatToBF16(float(H.getDouble(K)));
      break;
    case DType::F8E4M3:
    case DType::F8E5M2:
      static_cast<uint8_t *>(Buf)[K] =
          floatToF8(float(H.getDouble(K)), T.Dtype);
      break;
    case DType::I32:
      static_cast<int32_t *>(Buf)[K] =
          int32_t(H.isInt() ? wrapInt(H.ints()[K], T.Dtype)
                            : doubleToInt(H.getDouble(K), T.Dtype));
      break;
    case DType::I64:
      static_cast<int64_t *>(Buf)[K] =
          H.isInt() ? H.ints()[K] : doubleToInt(H.getDouble(K), T.Dtype);
      break;
    case DType::Bool:
      static_cast<uint8_t *>(Buf)[K] = H.getDouble(K) != 0;
      break;
    }
  }
}

const Value *valueAt(const std::vector<const Value *> &Vs, int I) {
  return I >= 0 && size_t(I) < Vs.size() ? Vs[I] : nullptr;
}

int dtypeOf(const Value *V) {
  if (!V)
    return -1;
  std::optional<mtsched_dtype> T = toCDType(V->getType().Dtype);
  return T ? int(*T) : -1;
}

int64_t dimOf(const Value *V, int D) {
  if (!V || D < 0 || unsigned(D) >= V->getType().rank())
    return -1;
  return V->getType().Shape[D];
}

/// Why graph G of several ranks cannot run here: a collective over a
/// process group smaller than the world (the runtime opens one
/// communicator, over every rank).
std::optional<std::string> subgroupCollective(const Module &M, const Graph &G) {
  for (const auto &N : G.getNodes()) {
    // Decided, a collective node names its group; undecided, a collective
    // op's "group" attribute does (the world where it has none).
    std::string Group;
    if (const auto *C =
            llvm::dyn_cast<CollectiveMultiTemplateBufferNode>(N.get()))
      Group = C->getGroup();
    else if (collectiveKindOf(N->getOp()) != CollectiveKind::None)
      Group = N->getAttrs().getString("group").value_or(WorldGroupName).str();
    else
      continue;
    std::vector<int64_t> Ranks = M.groupRanks(Group, G.getWorldSize());
    bool World = int64_t(Ranks.size()) == G.getWorldSize();
    for (size_t I = 0; World && I < Ranks.size(); ++I)
      World = Ranks[I] == int64_t(I);
    if (!World)
      return "'%" + N->getName() + "' runs over group @" + Group +
             ", not every rank in order; the runtime opens one communicator "
             "over all ranks";
  }
  return std::nullopt;
}

} // namespace

extern "C" {

int mtsched_runtime_api_version(void) { return MTSCHED_RUNTIME_API_VERSION; }

mtsched_module *mtsched_module_load(const char *IRText, size_t Len,
                                    char **Error) {
  if (!IRText && Len) {
    setError(Error, "mtsched_module_load: no text");
    return nullptr;
  }
  registerAllOpUnits();
  auto Mod = std::make_unique<mtsched_module>();
  std::string Diags;
  Mod->SM.setDiagHandler(collectDiagnostics, &Diags);
  Mod->SM.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(
                                 llvm::StringRef(IRText, Len), "<module>"),
                             llvm::SMLoc());
  Mod->M = parseModule(Mod->SM);
  if (Mod->M) {
    if (llvm::Error E = verifyModule(*Mod->M, Mod->SM)) {
      // The verifier reported through the handler; the error repeats it.
      if (Diags.empty())
        Diags = llvm::toString(std::move(E));
      else
        llvm::consumeError(std::move(E));
      Mod->M.reset();
    }
  }
  Mod->SM.setDiagHandler(nullptr);
  if (!Mod->M) {
    setError(Error,
             Diags.empty() ? "<module>: error: the module is invalid" : Diags);
    return nullptr;
  }
  return Mod.release();
}

void mtsched_module_destroy(mtsched_module *Module) { delete Module; }

int mtsched_comm_id(const char *Device, void *Id, size_t Len, char **Error) {
  llvm::StringRef Dev = Device ? Device : "";
  if (Dev != "cuda" && !Dev.starts_with("cuda:")) {
    setError(Error, "mtsched_comm_id: device '" + Dev.str() +
                        "' has no communicator (cuda)");
    return 1;
  }
  if (!Id || Len < MTSCHED_COMM_ID_BYTES) {
    setError(Error, "mtsched_comm_id: the buffer must hold " +
                        std::to_string(MTSCHED_COMM_ID_BYTES) + " bytes");
    return 1;
  }
  const BackendInfo *B = getBuiltinBackends().lookup("cuda");
  if (!B || !B->MakeCommId) {
    setError(Error, "this build's cuda backend makes no communicator id");
    return 1;
  }
  llvm::Expected<std::string> IdOr = B->MakeCommId();
  if (!IdOr) {
    setError(Error, llvm::toString(IdOr.takeError()));
    return 1;
  }
  if (IdOr->size() != MTSCHED_COMM_ID_BYTES) {
    setError(Error, "the communicator id has " + std::to_string(IdOr->size()) +
                        " bytes, not " + std::to_string(MTSCHED_COMM_ID_BYTES));
    return 1;
  }
  std::memcpy(Id, IdOr->data(), IdOr->size());
  return 0;
}

int mtsched_module_set_ranks(mtsched_module *Module, int Rank, int WorldSize,
                             const void *Id, size_t IdLen, char **Error) {
  if (!Module) {
    setError(Error, "mtsched_module_set_ranks: no module");
    return 1;
  }
  if (WorldSize < 1 || Rank < 0 || Rank >= WorldSize) {
    setError(Error, "mtsched_module_set_ranks: rank " + std::to_string(Rank) +
                        " of world size " + std::to_string(WorldSize) +
                        " (0 <= rank < world size)");
    return 1;
  }
  if (WorldSize > 1 && (!Id || IdLen != MTSCHED_COMM_ID_BYTES)) {
    setError(Error, "mtsched_module_set_ranks: " + std::to_string(WorldSize) +
                        " ranks need a communicator id of " +
                        std::to_string(MTSCHED_COMM_ID_BYTES) +
                        " bytes (mtsched_comm_id on rank 0), got " +
                        (Id ? std::to_string(IdLen) : std::string("none")));
    return 1;
  }
  Module->Rank = Rank;
  Module->WorldSize = WorldSize;
  Module->CommId = WorldSize > 1
                       ? std::string(static_cast<const char *>(Id), IdLen)
                       : std::string();
  return 0;
}

int mtsched_module_num_graphs(const mtsched_module *Module) {
  return Module ? int(Module->M->getGraphs().size()) : -1;
}

const char *mtsched_module_graph_name(const mtsched_module *Module, int I) {
  if (!Module || I < 0 || size_t(I) >= Module->M->getGraphs().size())
    return nullptr;
  return Module->M->getGraphs()[I]->getName().c_str();
}

mtsched_graph *mtsched_graph_prepare(mtsched_module *Module,
                                     const char *GraphName, const char *Device,
                                     const char *KernelCacheDir, char **Error) {
  if (!Module) {
    setError(Error, "mtsched_graph_prepare: no module");
    return nullptr;
  }
  const auto &Graphs = Module->M->getGraphs();
  const Graph *G = nullptr;
  if (!GraphName) {
    if (Graphs.size() != 1) {
      setError(Error, "the module has " + std::to_string(Graphs.size()) +
                          " graphs: name one");
      return nullptr;
    }
    G = Graphs.front().get();
  } else {
    for (const auto &Cand : Graphs)
      if (Cand->getName() == GraphName)
        G = Cand.get();
    if (!G) {
      setError(Error, std::string("the module has no graph @") + GraphName);
      return nullptr;
    }
  }
  // One process runs one rank; a graph of several ranks runs its
  // collectives over the communicator mtsched_module_set_ranks gave.
  if (G->getWorldSize() != 1 &&
      int64_t(Module->WorldSize) != G->getWorldSize()) {
    setError(Error, "graph @" + G->getName() + " has world_size " +
                        std::to_string(G->getWorldSize()) +
                        " but this process is rank " +
                        std::to_string(Module->Rank) + " of " +
                        std::to_string(Module->WorldSize) +
                        " (mtsched_module_set_ranks)");
    return nullptr;
  }
  if (G->getWorldSize() > 1)
    if (std::optional<std::string> Why = subgroupCollective(*Module->M, *G)) {
      setError(Error, *Why);
      return nullptr;
    }
  auto Out = std::make_unique<mtsched_graph>();
  Out->G = G;
  for (const auto &In : G->getInputs())
    Out->Inputs.push_back(In.get());
  for (const Operand &O : G->getOutputs())
    Out->Outputs.push_back(O.V);
  for (const Value *V : Out->Inputs)
    if (!toCDType(V->getType().Dtype)) {
      setError(Error, "input %" + V->getName() + " has an unknown dtype");
      return nullptr;
    }
  llvm::StringRef Dev = Device ? Device : "cpu";
  int Ordinal = 0;
  if (Dev.consume_front("cuda:")) {
    if (Dev.getAsInteger(10, Ordinal) || Ordinal < 0) {
      setError(Error, std::string("unknown device '") + Device +
                          "' (cpu, cuda or cuda:N)");
      return nullptr;
    }
    Dev = "cuda";
  }
  if (Dev == "cpu" && G->getWorldSize() > 1) {
    setError(Error, "graph @" + G->getName() + " has " +
                        std::to_string(G->getWorldSize()) +
                        " ranks; on cpu the interpreter runs one rank");
    return nullptr;
  }
  if (Dev == "cpu") {
    if (std::optional<InterpretRefusal> R =
            checkInterpretable(*G, defaultInterpretMaxBytes())) {
      setError(Error,
               "graph @" + G->getName() + " cannot run on cpu: " + R->Message);
      return nullptr;
    }
    return Out.release();
  }
  if (Dev != "cuda") {
    setError(Error, "unknown device '" + Dev.str() + "' (cpu, cuda or cuda:N)");
    return nullptr;
  }
  const BackendInfo *B = getBuiltinBackends().lookup("cuda");
  if (!B || !B->PrepareGraph) {
    setError(Error, "this build's cuda backend cannot run a graph on the "
                    "caller's buffers (no PrepareGraph hook; see "
                    "docs/RUNTIME.md)");
    return nullptr;
  }
  RunIO IO;
  if (KernelCacheDir)
    IO.KernelCacheDir = KernelCacheDir;
  IO.Device = Ordinal;
  if (G->getWorldSize() > 1) {
    IO.Rank = Module->Rank;
    IO.CommId = Module->CommId;
  }
  llvm::Expected<std::unique_ptr<PreparedGraph>> P =
      B->PrepareGraph(*Module->M, *G, IO);
  if (!P) {
    setError(Error, llvm::toString(P.takeError()));
    return nullptr;
  }
  Out->OnCpu = false;
  Out->Prepared = std::move(*P);
  return Out.release();
}

void mtsched_graph_destroy(mtsched_graph *Graph) { delete Graph; }

int mtsched_graph_num_inputs(const mtsched_graph *Graph) {
  return Graph ? int(Graph->Inputs.size()) : -1;
}
int mtsched_graph_num_outputs(const mtsched_graph *Graph) {
  return Graph ? int(Graph->Outputs.size()) : -1;
}
const char *mtsched_graph_input_name(const mtsched_graph *Graph, int I) {
  const Value *V = Graph ? valueAt(Graph->Inputs, I) : nullptr;
  return V ? V->getName().c_str() : nullptr;
}
const char *mtsched_graph_output_name(const mtsched_graph *Graph, int I) {
  const Value *V = Graph ? valueAt(Graph->Outputs, I) : nullptr;
  return V ? V->getName().c_str() : nullptr;
}
int mtsched_graph_input_dtype(const mtsched_graph *Graph, int I) {
  return dtypeOf(Graph ? valueAt(Graph->Inputs, I) : nullptr);
}
int mtsched_graph_output_dtype(const mtsched_graph *Graph, int I) {
  return dtypeOf(Graph ? valueAt(Graph->Outputs, I) : nullptr);
}
int mtsched_graph_input_rank(const mtsched_graph *Graph, int I) {
  const Value *V = Graph ? valueAt(Graph->Inputs, I) : nullptr;
  return V ? int(V->getType().rank()) : -1;
}
int mtsched_graph_output_rank(const mtsched_graph *Graph, int I) {
  const Value *V = Graph ? valueAt(Graph->Outputs, I) : nullptr;
  return V ? int(V->getType().rank()) : -1;
}
int64_t mtsched_graph_input_dim(const mtsched_graph *Graph, int I, int D) {
  return dimOf(Graph ? valueAt(Graph->Inputs, I) : nullptr, D);
}
int64_t mtsched_graph_output_dim(const mtsched_graph *Graph, int I, int D) {
  return dimOf(Graph ? valueAt(Graph->Outputs, I) : nullptr, D);
}

size_t mtsched_dtype_bytes(int T) {
  switch (T) {
  case MTSCHED_F32:
  case MTSCHED_I32:
    return 4;
  case MTSCHED_F16:
  case MTSCHED_BF16:
    return 2;
  case MTSCHED_I64:
    return 8;
  case MTSCHED_F8E4M3:
  case MTSCHED_F8E5M2:
  case MTSCHED_BOOL:
    return 1;
  default:
    return 0;
  }
}

int mtsched_graph_run(mtsched_graph *Graph, void *const *Inputs,
                      void *const *Outputs, void *Stream, char **Error) {
  if (!Graph) {
    setError(Error, "mtsched_graph_run: no graph");
    return 1;
  }
  if ((!Inputs && !Graph->Inputs.empty()) ||
      (!Outputs && !Graph->Outputs.empty())) {
    setError(Error, "mtsched_graph_run: no input or output array");
    return 1;
  }
  if (!Graph->OnCpu) {
    if (llvm::Error E = Graph->Prepared->run(Inputs, Outputs, Stream)) {
      setError(Error, llvm::toString(std::move(E)));
      return 1;
    }
    ++Graph->Runs;
    return 0;
  }
  ValueData Data;
  for (size_t I = 0; I < Graph->Inputs.size(); ++I) {
    if (!Inputs[I]) {
      setError(Error, "input %" + Graph->Inputs[I]->getName() + " is null");
      return 1;
    }
    Data[Graph->Inputs[I]] = readHost(*Graph->Inputs[I], Inputs[I]);
  }
  for (size_t I = 0; I < Graph->Outputs.size(); ++I)
    if (!Outputs[I]) {
      setError(Error, "output %" + Graph->Outputs[I]->getName() + " is null");
      return 1;
    }
  if (llvm::Error E = interpretGraph(*Graph->G, Data)) {
    setError(Error, llvm::toString(std::move(E)));
    return 1;
  }
  for (size_t I = 0; I < Graph->Outputs.size(); ++I) {
    const Value *V = Graph->Outputs[I];
    auto It = Data.find(V);
    if (It == Data.end()) {
      setError(Error, "output %" + V->getName() + " was not computed");
      return 1;
    }
    writeHost(*V, It->second, Outputs[I]);
  }
  ++Graph->Runs;
  return 0;
}

int64_t mtsched_graph_stat(const mtsched_graph *Graph, const char *Name) {
  if (!Graph || !Name)
    return -1;
  llvm::StringRef N(Name);
  if (N == "runs")
    return Graph->Runs;
  if (Graph->Prepared)
    return Graph->Prepared->stat(N);
  // The interpreter compiles, captures, stages and allocates on the device
  // nothing.
  for (const char *Zero : {"kernels", "kernels_cached", "kernels_compiled",
                           "captures", "graphs_kept", "staged_inputs",
                           "staged_outputs", "arena_bytes", "allocations"})
    if (N == Zero)
      return 0;
  return -1;
}

void mtsched_free_error(char *Error) { std::free(Error); }

} // extern "C"
