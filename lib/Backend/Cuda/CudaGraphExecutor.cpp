//===- CudaGraphExecutor.cpp - --run: a decided graph on the GPU ----------===//
//
// Runs every node of a decided graph in schedule order on the process's GPU
// session, checks each graph output against the fp64 interpreter and, if
// asked, times the whole graph replayed back to back.
//
//===----------------------------------------------------------------------===//
#include "CudaGraphRun.h"
#include "mtsched/Autotune/HorizontalSelect.h"
#include "mtsched/Autotune/PrologueSelect.h"
#include "mtsched/Backend/Cuda/AttentionCodegen.h"
#include "mtsched/Backend/Cuda/CollectiveCodegen.h"
#include "mtsched/Backend/Cuda/CudaBenchmarker.h"
#include "mtsched/Backend/Cuda/CudaCompiler.h"
#include "mtsched/Backend/Cuda/OpUnitKernels.h"
#include "mtsched/IR/OpUnit.h"
#include "mtsched/Lowering/CublasLtChoice.h"
#include "mtsched/Reference/Interpreter.h"
#include "mtsched/Reference/Npy.h"
#include "mtsched/Reference/RandomInputs.h"
#include "mtsched/Runtime/Roofline.h"
#include "mtsched/Schedule/Schedule.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/TimeProfiler.h"
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <mutex>

using namespace mtsched;
using namespace mtsched::cuda;

static llvm::Error err(const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Msg);
}

/// The tolerance of graph output V against the fp64 reference: its own
/// dtype's, or that of an fp8 value computed upstream if looser, with that
/// value. A value
/// near an fp8 rounding boundary may round the other way on the GPU (whose
/// inputs to the rounding are themselves rounded) than in the reference,
/// one fp8 step apart, and every value computed from it inherits that.
static std::pair<double, const Value *> outputTolerance(const Value &V) {
  double Tol = tolerance(V.getType().Dtype);
  const Value *Fp8 = nullptr;
  llvm::SmallPtrSet<const Value *, 32> Seen;
  llvm::SmallVector<const Value *, 32> Work{&V};
  while (!Work.empty()) {
    const Value *X = Work.pop_back_val();
    if (!Seen.insert(X).second)
      continue;
    // Graph inputs are the same values on both sides.
    DType T = X->getType().Dtype;
    if (X->getDef() && isFp8DType(T) && tolerance(T) > Tol) {
      Tol = tolerance(T);
      Fp8 = X;
    }
    if (const Node *D = X->getDef())
      for (const Operand &O : D->getOperands())
        Work.push_back(O.V);
  }
  return {Tol, Fp8};
}

/// The median of Samples samples of Run(Times), each timed between two
/// events on the session's stream and divided by Times, where Times makes a
/// sample about 1 ms long (from one timed run after three warm-ups). Each
/// sample starts behind one untimed run still on the GPU, as a run in a
/// steady stream does: on an idle GPU a sample would also time the host's
/// first launch (mtsched_torch.compare.cuda_time_us times the same way).
static CUresult timeSamples(Gpu &Gp, unsigned Samples,
                            llvm::function_ref<CUresult(unsigned)> Run,
                            double &MedianUs, unsigned &Times) {
  const DriverApi &D = *Gp.D;
  auto Timed = [&](unsigned N, double &Us) -> CUresult {
    D.cuEventRecord(Gp.E0, Gp.Stream);
    if (CUresult R = Run(N))
      return R;
    D.cuEventRecord(Gp.E1, Gp.Stream);
    if (CUresult R = syncEvent(D, Gp.E1, "the decided graph"))
      return R;
    float Ms = 0;
    D.cuEventElapsedTime(&Ms, Gp.E0, Gp.E1);
    Us = double(Ms) * 1000.0 / N;
    return CUDA_SUCCESS;
  };
  double Once = 0;
  if (CUresult R = Run(3))
    return R;
  if (CUresult R = Timed(1, Once))
    return R;
  Times =
      unsigned(std::min(1000.0, std::max(1.0, 1000.0 / std::max(Once, 1.0))));
  std::vector<double> Us;
  for (unsigned S = 0; S < std::max(1u, Samples); ++S) {
    double X = 0;
    if (CUresult R = Run(1))
      return R;
    if (CUresult R = Timed(Times, X))
      return R;
    Us.push_back(X);
  }
  llvm::sort(Us);
  MedianUs = Us[Us.size() / 2];
  return CUDA_SUCCESS;
}

CUgraphExec mtsched::cuda::captureGraph(
    Gpu &Gp, std::vector<std::function<CUresult()>> &Replay, std::string &Why) {
  const DriverApi &D = *Gp.D;
  if (!D.cuStreamBeginCapture || !D.cuStreamEndCapture ||
      !D.cuGraphInstantiateWithFlags || !D.cuGraphLaunch) {
    Why = "the CUDA driver has no graph API";
    return nullptr;
  }
  if (CUresult R =
          D.cuStreamBeginCapture(Gp.Stream, CU_STREAM_CAPTURE_MODE_RELAXED)) {
    Why = "cannot begin a capture: " + D.errorString(R);
    return nullptr;
  }
  CUresult Launch = CUDA_SUCCESS;
  for (auto &F : Replay)
    if ((Launch = F()))
      break;
  // The capture must end whatever happened, or the stream stays in capture
  // mode for every later use.
  CUgraph Graph = nullptr;
  CUresult End = D.cuStreamEndCapture(Gp.Stream, &Graph);
  auto DestroyGraph = llvm::make_scope_exit([&] {
    if (Graph)
      D.cuGraphDestroy(Graph);
  });
  if (Launch) {
    Why = "a launch cannot be captured: " + D.errorString(Launch);
    return nullptr;
  }
  if (End || !Graph) {
    Why = "the capture failed: " + D.errorString(End);
    return nullptr;
  }
  CUgraphExec Exec = nullptr;
  if (CUresult R = D.cuGraphInstantiateWithFlags(&Exec, Graph, 0)) {
    Why = "cannot instantiate the graph: " + D.errorString(R);
    return nullptr;
  }
  return Exec;
}

/// Times the whole decided graph two ways: captured once into a CUDA graph
/// and replayed (how it is deployed), and its launches issued eagerly back
/// to back (the host's dispatch gaps included). Prints one line; a failure
/// only warns, and a graph that cannot be captured is said loudly.
static void timeReplay(const Graph &G, Gpu &Gp,
                       std::vector<std::function<CUresult()>> &Replay,
                       unsigned Samples, llvm::raw_ostream &OS) {
  const DriverApi &D = *Gp.D;
  auto Eager = [&](unsigned Times) -> CUresult {
    for (unsigned I = 0; I < Times; ++I)
      for (auto &F : Replay)
        if (CUresult R = F())
          return R;
    return CUDA_SUCCESS;
  };
  std::string Why;
  CUgraphExec Exec = captureGraph(Gp, Replay, Why);
  auto DestroyExec = llvm::make_scope_exit([&] {
    if (Exec)
      D.cuGraphExecDestroy(Exec);
  });
  double GraphUs = 0, EagerUs = 0;
  unsigned GraphTimes = 0, EagerTimes = 0;
  CUresult R = CUDA_SUCCESS;
  if (Exec) {
    R = timeSamples(
        Gp, Samples,
        [&](unsigned Times) -> CUresult {
          for (unsigned I = 0; I < Times; ++I)
            if (CUresult RL = D.cuGraphLaunch(Exec, Gp.Stream))
              return RL;
          return CUDA_SUCCESS;
        },
        GraphUs, GraphTimes);
    if (R) {
      Why = "its replay failed: " + D.errorString(R);
      Exec = nullptr;
    }
  }
  R = timeSamples(Gp, Samples, Eager, EagerUs, EagerTimes);
  if (R) {
    OS << "run @" << G.getName()
       << ": warning: timing failed: " << D.errorString(R) << "\n";
    return;
  }
  if (!Exec)
    OS << "run @" << G.getName()
       << ": warning: the decided graph was not captured as a CUDA graph ("
       << Why << "); only its eager time is reported\n";
  OS << "run @" << G.getName() << ": decided graph ";
  if (Exec)
    OS << llvm::formatv("{0:f2}", GraphUs) << " us as a CUDA graph, ";
  OS << llvm::formatv("{0:f2}", EagerUs) << " us eager (median of "
     << std::max(1u, Samples) << " samples of " << EagerTimes
     << (Exec ? " eager and " + std::to_string(GraphTimes) + " graph"
              : std::string())
     << " back-to-back runs, " << Replay.size() << " launches a run)\n";
}

/// Buffers in the arena start at multiples of this: TMA and the kernels'
/// vector accesses need 16 bytes, cudaMalloc gives 256.
static constexpr size_t ArenaAlign = 256;

static size_t bufferBytes(const Value *V) {
  return llvm::alignTo(std::max<int64_t>(16, V->getType().numBytes()),
                       ArenaAlign);
}

size_t GraphRun::plannedBytes() const {
  // What launchAll allocates (alloc): each result a kernel writes to memory.
  // Not a reshape or a one-rank collective (views), not an epilogue fused
  // into its template, not a member of a fused group that only the group
  // reads (runGroup's outputs are those returned or read outside the group).
  llvm::DenseSet<const Node *> Epilogue;
  for (const auto &N : G.getNodes())
    if (const auto *M = llvm::dyn_cast<MultiTemplateBufferNode>(N.get()))
      if (M->isEpilogueFused())
        for (const Operand &E : M->getEpilogue())
          Epilogue.insert(E.V->getDef());
  size_t Sum = 0;
  // The inputs are allocated apart (InputBuffers): the runtime library
  // frees them once the caller's own buffers are bound.
  for (const auto &N : G.getNodes()) {
    if (Epilogue.count(N.get()))
      continue;
    const auto *B = llvm::dyn_cast<BufferNode>(N.get());
    if (B && B->getOp() == OpCode::Reshape)
      continue;
    if (const auto *C =
            llvm::dyn_cast<CollectiveMultiTemplateBufferNode>(N.get()))
      if (isOneRankView(*C))
        continue;
    if (B && !llvm::isa<MultiTemplateBufferNode>(B) &&
        B->getKernel() != BufferNode::NoKernel && !G.isOutput(B->getResult())) {
      bool Internal = true;
      for (const Node *U : G.getUsers(B->getResult())) {
        const auto *UB = llvm::dyn_cast<BufferNode>(U);
        Internal &= UB && !llvm::isa<MultiTemplateBufferNode>(UB) &&
                    UB->getKernel() == B->getKernel();
      }
      if (Internal)
        continue;
    }
    Sum += bufferBytes(N->getResult());
  }
  return Sum;
}

llvm::Error GraphRun::reserveArena() {
  if (Arena || ArenaBytes)
    return llvm::Error::success();
  size_t Bytes = plannedBytes();
  if (!Bytes)
    return llvm::Error::success();
  if (CUresult R = D.cuMemAlloc(&Arena, Bytes))
    return err("cannot allocate the " + llvm::Twine(Bytes) +
               "-byte arena of @" + G.getName() + ": " + D.errorString(R));
  ArenaBytes = Bytes;
  return llvm::Error::success();
}

llvm::Error GraphRun::allocBytes(size_t Bytes, CUdeviceptr &P,
                                 const llvm::Twine &What) {
  size_t Need = llvm::alignTo(std::max<size_t>(16, Bytes), ArenaAlign);
  if (Arena && ArenaUsed + Need <= ArenaBytes) {
    P = Arena + ArenaUsed;
    ArenaUsed += Need;
    return llvm::Error::success();
  }
  if (CUresult R = D.cuMemAlloc(&P, std::max<size_t>(16, Bytes)))
    return err("cannot allocate " + What + ": " + D.errorString(R));
  Owned.push_back(P);
  return llvm::Error::success();
}

llvm::Error GraphRun::alloc(const Value *V) {
  if (Dev.count(V))
    return llvm::Error::success();
  if (V->isGraphInput())
    return allocInput(V);
  CUdeviceptr P;
  if (llvm::Error E = allocBytes(size_t(V->getType().numBytes()), P,
                                 "'%" + V->getName() + "'"))
    return E;
  Dev[V] = P;
  return llvm::Error::success();
}

llvm::Error GraphRun::allocInput(const Value *V) {
  CUdeviceptr P;
  size_t Bytes = std::max<int64_t>(16, V->getType().numBytes());
  if (CUresult R = D.cuMemAlloc(&P, Bytes))
    return err("cannot allocate '%" + V->getName() + "': " + D.errorString(R));
  InputBuffers[V] = P;
  Dev[V] = P;
  return llvm::Error::success();
}

void GraphRun::releaseInput(const Value *V) {
  auto It = InputBuffers.find(V);
  if (It == InputBuffers.end())
    return;
  D.cuMemFree(It->second);
  InputBuffers.erase(It);
}

llvm::Error GraphRun::uploadInputs(ValueData &Host) {
  llvm::TimeTraceScope Scope("run.inputs");
  if (llvm::Error E = makeGraphInputs(G, IO, Host))
    return E;
  if (llvm::Error E = reserveArena())
    return E;
  for (const auto &In : G.getInputs()) {
    if (llvm::Error E = alloc(In.get()))
      return E;
    std::string Bytes =
        toDeviceBytes(Host[In.get()].toDoubles(), In->getType().Dtype);
    if (CUresult R = D.cuMemcpyHtoDAsync(Dev[In.get()], Bytes.data(),
                                         Bytes.size(), Gp.Stream))
      return err("cannot copy '%" + In->getName() + "': " + D.errorString(R));
  }
  return llvm::Error::success();
}

llvm::Error GraphRun::rebind() {
  for (KernelLaunch &L : Launches) {
    std::vector<CUdeviceptr> &Ptrs = L.State->second;
    for (size_t I = 0; I < L.Vals.size(); ++I)
      if (L.Vals[I])
        Ptrs[I] = resolve(L.Vals[I]);
    if (CUresult R = encodeTensorMaps(
            D, L.Shape,
            llvm::ArrayRef(Ptrs).take_front(L.Shape.Inputs.size() +
                                            L.Shape.Outputs.size()),
            L.State->first))
      return err("cannot encode the tensor maps of '" + L.Shape.Name +
                 "': " + D.errorString(R));
  }
  return llvm::Error::success();
}

llvm::Error GraphRun::zeroInputs() {
  if (llvm::Error E = reserveArena())
    return E;
  for (const auto &In : G.getInputs()) {
    if (llvm::Error E = alloc(In.get()))
      return E;
    if (CUresult R = D.cuMemsetD8Async(Dev[In.get()], 0,
                                       In->getType().numBytes(), Gp.Stream))
      return err("cannot clear '%" + In->getName() + "': " + D.errorString(R));
  }
  if (CUresult R = syncStream(D, Gp.Stream, "clearing the inputs"))
    return err("cannot clear the inputs: " + D.errorString(R));
  return llvm::Error::success();
}

llvm::Error GraphRun::runKernel(llvm::Expected<KernelSource> KOr) {
  if (!KOr)
    return KOr.takeError();
  KernelSource &K = *KOr;
  std::string Why = unsupportedReason(K, Gp.Info, D);
  if (!Why.empty())
    return err("'" + K.Name + "' " + Why);
  llvm::TimeTraceScope Scope("run.compile", K.Name);
  auto C = compileAll(
      {{K.Name, K.Source, K.NeedsSm90a}}, Arch,
      KernelCompileOptions{IO.CompileThreads, IO.KernelCacheDir}, &Kernels);
  if (!C[0])
    return C[0].takeError();
  CUmodule Mod;
  CUfunction Fn;
  if (CUresult R = D.cuModuleLoadData(&Mod, C[0]->data()))
    return err("cannot load '" + K.Name + "': " + D.errorString(R));
  Modules.push_back(Mod);
  if (CUresult R = D.cuModuleGetFunction(&Fn, Mod, K.Name.c_str()))
    return err("no entry point '" + K.Name + "': " + D.errorString(R));
  // Asked for all dynamic shared memory, not only above 48 KB: static
  // shared memory counts against the same 48 KB (CudaBenchPrepare.cpp).
  if (K.SharedBytes > 0)
    D.cuFuncSetAttribute(Fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                         int(K.SharedBytes));
  std::vector<CUdeviceptr> Ptrs;
  for (const Value *V : K.Inputs)
    Ptrs.push_back(Dev[V]);
  for (const Value *V : K.Outputs) {
    if (llvm::Error E = alloc(V))
      return E;
    Ptrs.push_back(Dev[V]);
  }
  if (K.WorkspaceBytes) {
    CUdeviceptr W;
    if (llvm::Error E = allocBytes(K.WorkspaceBytes, W,
                                   "the " + llvm::Twine(K.WorkspaceBytes) +
                                       "-byte workspace of '" + K.Name + "'"))
      return E;
    Ptrs.push_back(W);
    if (CUresult R = D.cuMemsetD8Async(W, 0, K.WorkspaceBytes, Gp.Stream))
      return err("cannot clear the workspace of '" + K.Name +
                 "': " + D.errorString(R));
  }
  std::vector<CUtensorMap> Maps;
  if (CUresult R = encodeTensorMaps(
          D, K,
          llvm::ArrayRef(Ptrs).take_front(K.Inputs.size() + K.Outputs.size()),
          Maps))
    return err("cannot encode the tensor maps of '" + K.Name +
               "': " + D.errorString(R));
  std::vector<void *> Args;
  for (CUtensorMap &Map : Maps)
    Args.push_back(&Map);
  for (CUdeviceptr &X : Ptrs)
    Args.push_back(&X);
  if (CUresult R = launchKernel(D, Fn, K, Gp.Info, Gp.Stream, Args.data()))
    return err("launch of '" + K.Name + "' failed: " + D.errorString(R));
  if (CUresult R = syncStream(D, Gp.Stream, "kernel '" + K.Name + "'"))
    return err("'" + K.Name + "' failed: " + D.errorString(R));
  auto State = std::make_shared<
      std::pair<std::vector<CUtensorMap>, std::vector<CUdeviceptr>>>(
      std::move(Maps), std::move(Ptrs));
  // The launch shape without the source text.
  KernelSource Shape = K;
  Shape.Source.clear();
  std::vector<const Value *> Vals(K.Inputs.begin(), K.Inputs.end());
  Vals.insert(Vals.end(), K.Outputs.begin(), K.Outputs.end());
  Vals.resize(State->second.size(), nullptr);
  Launches.push_back({State, std::move(Vals), Shape});
  const DriverApi &Drv = D;
  Gpu &Dev0 = Gp;
  Replay.push_back([&Drv, &Dev0, Fn, State, Shape] {
    std::vector<void *> A;
    for (CUtensorMap &Map : State->first)
      A.push_back(&Map);
    for (CUdeviceptr &X : State->second)
      A.push_back(&X);
    return launchKernel(Drv, Fn, Shape, Dev0.Info, Dev0.Stream, A.data());
  });
  ++Launched;
  return llvm::Error::success();
}

llvm::Error GraphRun::runHorizontal(const MultiTemplateBufferNode &M) {
  const MultiTemplateBufferNode *Leader = &M;
  if (std::optional<llvm::StringRef> Of =
          M.getAttrs().getString(HorizontalOfAttr)) {
    Leader = nullptr;
    for (const auto &N : G.getNodes())
      if (N->getName() == *Of)
        Leader = llvm::dyn_cast<MultiTemplateBufferNode>(N.get());
    if (!Leader || !Leader->getAttrs().contains(HorizontalAttr))
      return err("'%" + M.getName() + "' is merged into '%" + *Of +
                 "', which leads no horizontal group");
  }
  if (!HorizontalDone.insert(Leader).second)
    return llvm::Error::success();
  return runKernel(generateHorizontalGroupKernel(G, *Leader));
}

llvm::Error GraphRun::runTemplate(const MultiTemplateBufferNode &M) {
  if (!M.isDecided())
    return err("'%" + M.getName() + "' is not decided; run --autotune");
  if (const auto *C = llvm::dyn_cast<CollectiveMultiTemplateBufferNode>(&M))
    return runCollective(*C);
  if (M.getAttrs().contains(HorizontalAttr) ||
      M.getAttrs().contains(HorizontalOfAttr))
    return runHorizontal(M);
  // The norm that defines A runs in this GEMM's prologue (select-prologue);
  // the norm itself launches nothing.
  if (M.getAttrs().contains(PrologueAttr))
    return runKernel(generatePrologueKernel(G, M));
  auto CannotRun = [&] {
    return err("'%" + M.getName() + "': cannot run decision '" +
               M.getDecision() + "' on the GPU");
  };
  const Choice *Ch = M.findChoice(M.getDecision());
  if (hasOpUnitChoices(M.getOp())) {
    if (!Ch || M.isEpilogueFused())
      return CannotRun();
    if (Ch->isExtern())
      return runOpUnitExtern(M);
    return runKernel(
        generateOpUnitChoiceKernel(nextKernelName(), M, M.getDecision()));
  }
  if (M.getOp() == OpCode::Attention) {
    if (!Ch || M.isEpilogueFused())
      return CannotRun();
    return runKernel(generateAttentionKernel(M, *Ch));
  }
  if (M.getOp() == OpCode::SwiGlu) {
    std::optional<GemmTileConfig> T = Ch ? swigluTileOf(*Ch) : std::nullopt;
    if (!T || M.isEpilogueFused())
      return CannotRun();
    return runKernel(generateSwiGluKernel(M, *T));
  }
  if (std::optional<GemmTileConfig> T = Ch ? gemmTileOf(*Ch) : std::nullopt)
    return runKernel(generateGemmKernel(M, *T, M.isEpilogueFused()));
  // cuBLAS or cuBLASLt (extern.cublaslt_aN); cuBLASLt opens with cuBLAS.
  if ((M.getDecision() == "extern.cublas" || cublasLtAlgoOf(M.getDecision())) &&
      Gp.blas())
    return runCublas(M);
  return CannotRun();
}

llvm::Error GraphRun::runGroup(const BufferNode &B) {
  int Id = groupId(B);
  if (GroupDone[Id])
    return llvm::Error::success();
  GroupDone[Id] = true;
  std::vector<const Node *> Members;
  for (const auto &X : G.getNodes())
    if (const auto *XB = llvm::dyn_cast<BufferNode>(X.get()))
      if (!Fused.count(XB) && groupId(*XB) == Id)
        Members.push_back(XB);
  llvm::DenseSet<const Node *> Set(Members.begin(), Members.end());
  // A member's value leaves the kernel if the graph returns it or a node
  // outside the group reads it.
  std::vector<const Value *> Outs;
  for (const Node *X : Members) {
    bool External = G.isOutput(X->getResult());
    for (const Node *U : G.getUsers(X->getResult()))
      External |= !Set.count(U);
    if (External)
      Outs.push_back(X->getResult());
  }
  return runKernel(generateGroupKernel(nextKernelName(), Members, Outs));
}

llvm::Error GraphRun::runBuffer(const BufferNode &B) {
  // Ops with a kernel of their own, never in a group.
  if (isOpUnit(B.getOp()))
    return runKernel(generateOpUnitKernel(nextKernelName(), B));
  if (isLayout(B.getOp()) && !InLayoutGroup.count(&B)) {
    // reshape is a view of its operand's memory; the other layout ops
    // gather into their own buffer. In a group with others, the group's
    // kernel reads through them.
    if (B.getOp() == OpCode::Reshape) {
      Dev[B.getResult()] = Dev[B.getOperand(0)];
      Alias[B.getResult()] = B.getOperand(0);
      return llvm::Error::success();
    }
    return runKernel(generateLayoutKernel(nextKernelName(), B));
  }
  return runGroup(B);
}

void GraphRun::findFusedNodes() {
  for (const auto &N : G.getNodes())
    if (const auto *M = llvm::dyn_cast<MultiTemplateBufferNode>(N.get()))
      if (M->isEpilogueFused())
        for (const Operand &E : M->getEpilogue())
          Fused.insert(E.V->getDef());
  std::map<unsigned, unsigned> Size;
  for (const auto &N : G.getNodes())
    if (const auto *B = llvm::dyn_cast<BufferNode>(N.get()))
      if (B->getKernel() != BufferNode::NoKernel)
        ++Size[B->getKernel()];
  for (const auto &N : G.getNodes())
    if (const auto *B = llvm::dyn_cast<BufferNode>(N.get()))
      if (isLayout(B->getOp()) && B->getKernel() != BufferNode::NoKernel &&
          Size[B->getKernel()] > 1)
        InLayoutGroup.insert(B);
}

llvm::Error GraphRun::launchAll() {
  findFusedNodes();
  // Kernels run in the schedule's order, not at their first node: a fused
  // group may read a value computed after its first member
  // (Schedule/Schedule.h).
  llvm::Expected<Schedule> Sched = buildSchedule(G);
  if (!Sched)
    return Sched.takeError();
  for (const ScheduledKernel &SK : Sched->Kernels) {
    const Node *N = SK.getLeader();
    if (Fused.count(N))
      continue;
    if (const auto *M = llvm::dyn_cast<MultiTemplateBufferNode>(N)) {
      if (llvm::Error E = runTemplate(*M))
        return E;
      continue;
    }
    const auto *B = llvm::dyn_cast<BufferNode>(N);
    if (!B)
      return err("'%" + N->getName() + "' is not lowered; run --lower");
    // A norm every reader of which runs it in its prologue (a kernel of its
    // own, as select-prologue and verify-schedule require).
    if (SK.Nodes.size() == 1 && B->getAttrs().contains(PrologueIntoAttr))
      continue;
    if (llvm::Error E = runBuffer(*B))
      return E;
  }
  return llvm::Error::success();
}

llvm::Expected<bool> GraphRun::readOutputs(const ValueData &Host,
                                           llvm::raw_ostream &OS) {
  bool AllOk = true;
  for (const Operand &O : G.getOutputs()) {
    const Value *V = O.V;
    std::string Bytes(V->getType().numBytes(), '\0');
    if (CUresult R = D.cuMemcpyDtoH(&Bytes[0], Dev[V], Bytes.size()))
      return err("cannot read '%" + V->getName() + "': " + D.errorString(R));
    std::vector<double> Out = toHostValues(Bytes, V->getType().Dtype);
    if (!IO.OutputDir.empty())
      if (llvm::Error E = writeNpy(npyPathFor(IO.OutputDir, *V),
                                   V->getType().Dtype, V->getType().Shape, Out))
        return std::move(E);
    if (!IO.Check) {
      OS << "run @" << G.getName() << ": output %" << V->getName()
         << " computed, not checked (--run-check=false; " << Launched
         << " launches)\n";
      continue;
    }
    const std::vector<double> Ref = Host.find(V)->second.toDoubles();
    double E2 = 0, R2 = 0;
    bool Finite = true;
    for (size_t I = 0; I < Out.size(); ++I) {
      Finite &= std::isfinite(Out[I]) || !std::isfinite(Ref[I]);
      E2 += (Out[I] - Ref[I]) * (Out[I] - Ref[I]);
      R2 += Ref[I] * Ref[I];
    }
    double Rel = R2 > 0 ? std::sqrt(E2 / R2) : std::sqrt(E2);
    auto [Tol, Fp8] = outputTolerance(*V);
    bool Ok = Finite && Rel <= Tol;
    AllOk &= Ok;
    OS << "run @" << G.getName() << ": output %" << V->getName() << " "
       << (Ok ? "matches" : "DIFFERS FROM")
       << " the fp64 reference (relative error " << llvm::formatv("{0:e2}", Rel)
       << ", tolerance " << llvm::formatv("{0:e0}", Tol)
       << (Fp8 ? " as it depends on " + dtypeName(Fp8->getType().Dtype).str() +
                     " value %" + Fp8->getName()
               : std::string())
       << ", " << Launched << " launches)\n";
  }
  return AllOk;
}

llvm::Error mtsched::runGraphOnGpu(const Graph &G, const RunIO &IO,
                                   llvm::raw_ostream &OS) {
  llvm::Expected<Gpu &> GOr = gpu(0);
  if (!GOr)
    return err("--run needs the cuda backend: " +
               llvm::toString(GOr.takeError()));
  Gpu &Gp = *GOr;
  std::lock_guard<std::mutex> Lock(Gp.Mu);
  if (llvm::Error E = makeCurrent(Gp.Info))
    return E;
  GraphRun Run(G, IO, Gp);
  ValueData Host;
  if (llvm::Error E = Run.uploadInputs(Host))
    return E;
  if (IO.Check)
    for (const auto &N : G.getNodes()) {
      llvm::TimeTraceScope Scope("run.interpret", "%" + N->getName());
      if (llvm::Error E = interpretNode(*N, Host))
        return E;
    }
  if (llvm::Error E = Run.launchAll())
    return E;
  llvm::Expected<bool> AllOk = Run.readOutputs(Host, OS);
  if (!AllOk)
    return AllOk.takeError();
  if (!*AllOk)
    return err("@" + G.getName() + ": an output differs from the reference");
  if (IO.TimeRuns > 0)
    timeReplay(G, Gp, Run.replay(), IO.TimeRuns, OS);
  return llvm::Error::success();
}
