//===- CudaGraphExecutor.cpp - --run: a decided graph on the GPU ----------===//
//
// Runs every node of a decided graph in schedule order on the process's GPU
// session, checks each graph output against the fp64 interpreter and, if
// asked, times the whole graph replayed back to back.
//
//===----------------------------------------------------------------------===//
#include "CudaDevice.h"
#include "mtsched/Autotune/Interpreter.h"
#include "mtsched/Autotune/Npy.h"
#include "mtsched/Autotune/RandomInputs.h"
#include "mtsched/Backend/Cuda/AttentionCodegen.h"
#include "mtsched/Backend/Cuda/CollectiveCodegen.h"
#include "mtsched/Backend/Cuda/CudaBenchmarker.h"
#include "mtsched/Backend/Cuda/CudaCompiler.h"
#include "mtsched/Schedule/Schedule.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/SmallPtrSet.h"
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

/// Times the whole decided graph: its launches replayed back to back
/// between two events, enough times for about 1 ms a sample, the median of
/// Samples samples. Prints one line; a failure only warns.
static void timeReplay(const Graph &G, Gpu &Gp,
                       std::vector<std::function<CUresult()>> &Replay,
                       unsigned Samples, llvm::raw_ostream &OS) {
  const DriverApi &D = *Gp.D;
  auto RunAll = [&](unsigned Times) -> CUresult {
    for (unsigned I = 0; I < Times; ++I)
      for (auto &F : Replay)
        if (CUresult R = F())
          return R;
    return CUDA_SUCCESS;
  };
  auto Timed = [&](unsigned Times, double &Us) -> CUresult {
    D.cuEventRecord(Gp.E0, Gp.Stream);
    if (CUresult R = RunAll(Times))
      return R;
    D.cuEventRecord(Gp.E1, Gp.Stream);
    if (CUresult R = syncEvent(D, Gp.E1, "the decided graph"))
      return R;
    float Ms = 0;
    D.cuEventElapsedTime(&Ms, Gp.E0, Gp.E1);
    Us = double(Ms) * 1000.0 / Times;
    return CUDA_SUCCESS;
  };
  double Once = 0;
  CUresult R = RunAll(3);
  if (!R)
    R = Timed(1, Once);
  unsigned Times =
      unsigned(std::min(1000.0, std::max(1.0, 1000.0 / std::max(Once, 1.0))));
  std::vector<double> Us;
  for (unsigned S = 0; S < Samples && !R; ++S) {
    double X = 0;
    R = Timed(Times, X);
    Us.push_back(X);
  }
  if (R || Us.empty()) {
    OS << "run @" << G.getName()
       << ": warning: timing failed: " << D.errorString(R) << "\n";
    return;
  }
  llvm::sort(Us);
  OS << "run @" << G.getName() << ": decided graph "
     << llvm::formatv("{0:f2}", Us[Us.size() / 2]) << " us (median of "
     << Us.size() << " samples of " << Times << " back-to-back runs, "
     << Replay.size() << " launches a run)\n";
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
  const DriverApi &D = *Gp.D;
  int Arch = Gp.Info.Major * 10 + Gp.Info.Minor;
  ValueData Host;
  std::map<const Value *, CUdeviceptr> Dev;
  std::vector<CUdeviceptr> Owned;
  std::vector<CUmodule> Modules;
  auto Cleanup = llvm::make_scope_exit([&] {
    for (CUdeviceptr P : Owned)
      D.cuMemFree(P);
    for (CUmodule M : Modules)
      D.cuModuleUnload(M);
  });
  auto Alloc = [&](const Value *V) -> llvm::Error {
    if (Dev.count(V))
      return llvm::Error::success();
    CUdeviceptr P;
    size_t Bytes = std::max<int64_t>(16, V->getType().numBytes());
    if (CUresult R = D.cuMemAlloc(&P, Bytes))
      return err("cannot allocate '%" + V->getName() +
                 "': " + D.errorString(R));
    Owned.push_back(P);
    Dev[V] = P;
    return llvm::Error::success();
  };
  std::optional<llvm::TimeTraceScope> Inputs;
  Inputs.emplace("run.inputs");
  if (llvm::Error E = makeGraphInputs(G, IO, Host))
    return E;
  for (const auto &In : G.getInputs()) {
    if (llvm::Error E = Alloc(In.get()))
      return E;
    std::string Bytes =
        toDeviceBytes(Host[In.get()].toDoubles(), In->getType().Dtype);
    if (CUresult R = D.cuMemcpyHtoDAsync(Dev[In.get()], Bytes.data(),
                                         Bytes.size(), Gp.Stream))
      return err("cannot copy '%" + In->getName() + "': " + D.errorString(R));
  }
  Inputs.reset();
  // Every launch of the graph, in order, replayed to time the whole graph
  // once its outputs are checked.
  std::vector<std::function<CUresult()>> Replay;
  auto RunKernel = [&](llvm::Expected<KernelSource> KOr) -> llvm::Error {
    if (!KOr)
      return KOr.takeError();
    KernelSource &K = *KOr;
    std::string Why = unsupportedReason(K, Gp.Info, D);
    if (!Why.empty())
      return err("'" + K.Name + "' " + Why);
    llvm::TimeTraceScope Scope("run.compile", K.Name);
    auto C =
        compileAll({{K.Name, K.Source, K.NeedsSm90a}}, Arch,
                   KernelCompileOptions{IO.CompileThreads, IO.KernelCacheDir});
    if (!C[0])
      return C[0].takeError();
    CUmodule Mod;
    CUfunction Fn;
    if (CUresult R = D.cuModuleLoadData(&Mod, C[0]->data()))
      return err("cannot load '" + K.Name + "': " + D.errorString(R));
    Modules.push_back(Mod);
    if (CUresult R = D.cuModuleGetFunction(&Fn, Mod, K.Name.c_str()))
      return err("no entry point '" + K.Name + "': " + D.errorString(R));
    if (K.SharedBytes > 48 * 1024)
      D.cuFuncSetAttribute(Fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                           int(K.SharedBytes));
    std::vector<CUdeviceptr> Ptrs;
    for (const Value *V : K.Inputs)
      Ptrs.push_back(Dev[V]);
    for (const Value *V : K.Outputs) {
      if (llvm::Error E = Alloc(V))
        return E;
      Ptrs.push_back(Dev[V]);
    }
    if (K.WorkspaceBytes) {
      CUdeviceptr W;
      if (CUresult R = D.cuMemAlloc(&W, K.WorkspaceBytes))
        return err("cannot allocate the " + llvm::Twine(K.WorkspaceBytes) +
                   "-byte workspace of '" + K.Name + "': " + D.errorString(R));
      Owned.push_back(W);
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
    if (CUresult R =
            launchKernel(D, Fn, K, Gp.Info.SMs, Gp.Stream, Args.data()))
      return err("launch of '" + K.Name + "' failed: " + D.errorString(R));
    if (CUresult R = syncStream(D, Gp.Stream, "kernel '" + K.Name + "'"))
      return err("'" + K.Name + "' failed: " + D.errorString(R));
    auto State = std::make_shared<
        std::pair<std::vector<CUtensorMap>, std::vector<CUdeviceptr>>>(
        std::move(Maps), std::move(Ptrs));
    // The launch shape without the source text.
    KernelSource Shape = K;
    Shape.Source.clear();
    Replay.push_back([&D, &Gp, Fn, State, Shape] {
      std::vector<void *> A;
      for (CUtensorMap &Map : State->first)
        A.push_back(&Map);
      for (CUdeviceptr &X : State->second)
        A.push_back(&X);
      return launchKernel(D, Fn, Shape, Gp.Info.SMs, Gp.Stream, A.data());
    });
    return llvm::Error::success();
  };
  // Nodes fused into a template's epilogue run inside it.
  llvm::DenseSet<const Node *> Fused;
  for (const auto &N : G.getNodes())
    if (const auto *M = llvm::dyn_cast<MultiTemplateBufferNode>(N.get()))
      if (M->isEpilogueFused())
        for (const Operand &E : M->getEpilogue())
          Fused.insert(E.V->getDef());
  std::map<int, bool> GroupDone;
  // Layout ops in a kernel group with others: the group reads through them.
  llvm::DenseSet<const Node *> InLayoutGroup;
  {
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
  unsigned Launched = 0;
  if (IO.Check)
    for (const auto &N : G.getNodes()) {
      llvm::TimeTraceScope Scope("run.interpret", "%" + N->getName());
      if (llvm::Error E = interpretNode(*N, Host))
        return E;
    }
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
      if (!M->isDecided())
        return err("'%" + M->getName() + "' is not decided; run --autotune");
      if (const auto *C =
              llvm::dyn_cast<CollectiveMultiTemplateBufferNode>(M)) {
        (void)C;
        if (G.getWorldSize() > 1)
          return err("'%" + M->getName() +
                     "': --run executes collectives only on one rank");
        if (M->getNumOperands() == 3) {
          if (llvm::Error E = RunKernel(
                  generateRaggedCopyKernel("ragged_" + M->getName(), *M)))
            return E;
        } else {
          if (llvm::Error E = Alloc(M->getResult()))
            return E;
          D.cuMemcpyDtoDAsync(Dev[M->getResult()], Dev[M->getOperand(0)],
                              M->getType().numBytes(), Gp.Stream);
          syncStream(D, Gp.Stream, "a copy of '%" + M->getName() + "'");
          Replay.push_back([&D, &Gp, Dst = Dev[M->getResult()],
                            Src = Dev[M->getOperand(0)],
                            Bytes = size_t(M->getType().numBytes())] {
            return D.cuMemcpyDtoDAsync(Dst, Src, Bytes, Gp.Stream);
          });
        }
        if (M->isEpilogueFused()) {
          if (llvm::Error E = RunKernel(generateEpilogueKernel(*M)))
            return E;
        }
        ++Launched;
        continue;
      }
      const Choice *Ch = M->findChoice(M->getDecision());
      if (M->getOp() == OpCode::Attention) {
        if (!Ch || M->isEpilogueFused())
          return err("'%" + M->getName() + "': cannot run decision '" +
                     M->getDecision() + "' on the GPU");
        if (llvm::Error E = RunKernel(generateAttentionKernel(*M, *Ch)))
          return E;
        ++Launched;
        continue;
      }
      if (M->getOp() == OpCode::SwiGlu) {
        std::optional<GemmTileConfig> T = Ch ? swigluTileOf(*Ch) : std::nullopt;
        if (!T || M->isEpilogueFused())
          return err("'%" + M->getName() + "': cannot run decision '" +
                     M->getDecision() + "' on the GPU");
        if (llvm::Error E = RunKernel(generateSwiGluKernel(*M, *T)))
          return E;
        ++Launched;
        continue;
      }
      std::optional<GemmTileConfig> T = Ch ? gemmTileOf(*Ch) : std::nullopt;
      if (T) {
        if (llvm::Error E =
                RunKernel(generateGemmKernel(*M, *T, M->isEpilogueFused())))
          return E;
      } else if (M->getDecision() == "extern.cublas" && Gp.blas() &&
                 M->getNumOperands() == 2 &&
                 M->getOperand(1)->getType().rank() == 2) {
        if (llvm::Error E = Alloc(M->getResult()))
          return E;
        int Type = M->getType().Dtype == DType::BF16  ? CUDA_R_16BF
                   : M->getType().Dtype == DType::F16 ? CUDA_R_16F
                                                      : CUDA_R_32F;
        int Nn = int(M->getType().innerDim()), Rows = int(rowsOf(M->getType()));
        int K = int(M->getOperand(0)->getType().innerDim());
        float One = 1, Zero = 0;
        if (int S = Gp.B->cublasGemmEx(
                Gp.Blas, CUBLAS_OP_N, CUBLAS_OP_N, Nn, Rows, K, &One,
                reinterpret_cast<void *>(Dev[M->getOperand(1)]), Type, Nn,
                reinterpret_cast<void *>(Dev[M->getOperand(0)]), Type, K, &Zero,
                reinterpret_cast<void *>(Dev[M->getResult()]), Type, Nn,
                CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT))
          return err("cublasGemmEx failed with status " + std::to_string(S));
        syncStream(D, Gp.Stream, "cuBLAS for '%" + M->getName() + "'");
        void *PA = reinterpret_cast<void *>(Dev[M->getOperand(0)]),
             *PB = reinterpret_cast<void *>(Dev[M->getOperand(1)]),
             *PC = reinterpret_cast<void *>(Dev[M->getResult()]);
        Replay.push_back([&Gp, Type, Nn, Rows, K, PA, PB, PC] {
          float One = 1, Zero = 0;
          return CUresult(Gp.B->cublasGemmEx(
                              Gp.Blas, CUBLAS_OP_N, CUBLAS_OP_N, Nn, Rows, K,
                              &One, PB, Type, Nn, PA, Type, K, &Zero, PC, Type,
                              Nn, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)
                              ? 1
                              : 0);
        });
        if (M->isEpilogueFused())
          return err("extern.cublas cannot run a fused epilogue");
      } else {
        return err("'%" + M->getName() + "': cannot run decision '" +
                   M->getDecision() + "' on the GPU");
      }
      ++Launched;
      continue;
    }
    const auto *B = llvm::dyn_cast<BufferNode>(N);
    if (!B)
      return err("'%" + N->getName() + "' is not lowered; run --lower");
    if (isSort(B->getOp()) || isScatter(B->getOp()) || isScan(B->getOp())) {
      // Ops with a kernel of their own, never in a group.
      std::string Name = G.getName() + "_run_kernel" + std::to_string(Launched);
      if (llvm::Error E = RunKernel(
              isSort(B->getOp())      ? generateSortKernel(Name, *B)
              : isScatter(B->getOp()) ? generateScatterKernel(Name, *B)
                                      : generateScanKernel(Name, *B)))
        return E;
      ++Launched;
      continue;
    }
    if (isLayout(B->getOp()) && !InLayoutGroup.count(B)) {
      // reshape is a view of its operand's memory; the other layout ops
      // gather into their own buffer. In a group with others, the group's
      // kernel reads through them.
      if (B->getOp() == OpCode::Reshape) {
        Dev[B->getResult()] = Dev[B->getOperand(0)];
        continue;
      }
      if (llvm::Error E = RunKernel(generateLayoutKernel(
              G.getName() + "_run_kernel" + std::to_string(Launched), *B)))
        return E;
      ++Launched;
      continue;
    }
    int Id = B->getKernel() == BufferNode::NoKernel ? -1 - int(B->getIndex())
                                                    : B->getKernel();
    if (GroupDone[Id])
      continue;
    GroupDone[Id] = true;
    std::vector<const Node *> Members;
    for (const auto &X : G.getNodes())
      if (const auto *XB = llvm::dyn_cast<BufferNode>(X.get()))
        if (!Fused.count(XB) && (XB->getKernel() == BufferNode::NoKernel
                                     ? -1 - int(XB->getIndex()) == Id
                                     : XB->getKernel() == Id))
          Members.push_back(XB);
    llvm::DenseSet<const Node *> Set(Members.begin(), Members.end());
    std::vector<const Value *> Outs;
    for (const Node *X : Members) {
      bool External = G.isOutput(X->getResult());
      for (const Node *U : G.getUsers(X->getResult()))
        External |= !Set.count(U);
      if (External)
        Outs.push_back(X->getResult());
    }
    if (llvm::Error E = RunKernel(generateGroupKernel(
            G.getName() + "_run_kernel" + std::to_string(Launched), Members,
            Outs)))
      return E;
    ++Launched;
  }
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
        return E;
    if (!IO.Check) {
      OS << "run @" << G.getName() << ": output %" << V->getName()
         << " computed, not checked (--run-check=false; " << Launched
         << " launches)\n";
      continue;
    }
    const std::vector<double> Ref = Host[V].toDoubles();
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
  if (!AllOk)
    return err("@" + G.getName() + ": an output differs from the reference");
  if (IO.TimeRuns > 0)
    timeReplay(G, Gp, Replay, IO.TimeRuns, OS);
  return llvm::Error::success();
}
