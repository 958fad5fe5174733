//===- CudaGraphRun.h - One run of a decided graph on the GPU ---*- C++ -*-===//
//
// Private to the CUDA backend: GraphRun, the decided graph's buffers, kernels
// and launches on the GPU, which `--run` (CudaGraphExecutor.cpp) and the
// runtime library's prepared graph (CudaPreparedGraph.cpp) both drive, and
// captureGraph, which records its launches as one CUDA graph. Its
// collectives and library calls (NCCL, cuBLAS, extern.cudnn) are in
// GraphRunLaunches.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_LIB_BACKEND_CUDA_CUDAGRAPHRUN_H
#define MTSCHED_LIB_BACKEND_CUDA_CUDAGRAPHRUN_H

#include "CudaDevice.h"
#include "mtsched/Autotune/HorizontalSelect.h"
#include "mtsched/Backend/Cuda/AttentionCodegen.h"
#include "mtsched/Backend/Cuda/CollectiveCodegen.h"
#include "mtsched/Backend/Cuda/CudaBenchmarker.h"
#include "mtsched/Backend/Cuda/CudaCompiler.h"
#include "mtsched/Backend/Cuda/NcclApi.h"
#include "mtsched/Backend/Cuda/OpUnitKernels.h"
#include "mtsched/Reference/Interpreter.h"
#include "mtsched/Reference/Npy.h"
#include "mtsched/Reference/RandomInputs.h"
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

namespace mtsched {
namespace cuda {

/// One `--run` of a decided graph, in named steps: its inputs on the GPU,
/// every kernel compiled, loaded and launched in schedule order (each
/// launch kept to be replayed when the graph is timed), its outputs read
/// back and checked. It owns the device buffers and modules it made.
class GraphRun {
public:
  GraphRun(const Graph &G, const RunIO &IO, Gpu &Gp)
      : G(G), IO(IO), Gp(Gp), D(*Gp.D),
        Arch(Gp.Info.Major * 10 + Gp.Info.Minor) {}
  GraphRun(const GraphRun &) = delete;
  GraphRun &operator=(const GraphRun &) = delete;
  ~GraphRun() {
    for (CUdeviceptr P : Owned)
      D.cuMemFree(P);
    for (auto &[V, P] : InputBuffers)
      D.cuMemFree(P);
    if (Arena)
      D.cuMemFree(Arena);
    for (CUmodule M : Modules)
      D.cuModuleUnload(M);
  }

  /// The graph's inputs (files or seeded values, as IO says) into Host and
  /// onto the GPU.
  llvm::Error uploadInputs(ValueData &Host);
  /// Every kernel of the decided graph, launched in schedule order.
  llvm::Error launchAll();
  /// Reads every output back, writes IO's output files and, if IO.Check,
  /// compares it with Host's fp64 reference, a line per output on OS.
  /// False if an output differs.
  llvm::Expected<bool> readOutputs(const ValueData &Host,
                                   llvm::raw_ostream &OS);
  /// Every input in a zeroed buffer of its own (the runtime library's
  /// prepare: values to launch every kernel on once, and zero indices are
  /// in range for any gather).
  llvm::Error zeroInputs();
  /// The device buffer of V (after launchAll: every value the graph
  /// returns).
  CUdeviceptr devicePtr(const Value *V) const {
    auto It = Dev.find(V);
    return It == Dev.end() ? 0 : It->second;
  }
  /// Every launch of one run of the graph, in order.
  std::vector<std::function<CUresult()>> &replay() { return Replay; }
  /// The buffer V's elements are in: a reshape's is its operand's.
  CUdeviceptr resolve(const Value *V) const {
    for (auto A = Alias.find(V); A != Alias.end(); A = Alias.find(V))
      V = A->second;
    return devicePtr(V);
  }
  /// Whether collective C of a one-rank graph runs as a view of its
  /// operand: not ragged, no fused epilogue, as many bytes in as out.
  bool isOneRankView(const CollectiveMultiTemplateBufferNode &C) const;
  /// Whether V is a view of another value's buffer (a reshape, or a
  /// one-rank collective: isOneRankView).
  bool isAlias(const Value *V) const { return Alias.count(V); }
  /// Puts V in buffer P from the next rebind() on (the runtime library
  /// binds the caller's pointers).
  void bind(const Value *V, CUdeviceptr P) { Dev[V] = P; }
  /// Makes every kept launch use the buffers bound now: its pointer
  /// arguments and the tensor maps encoded from them. Launches read these
  /// when issued (replay()); a CUDA graph captured before keeps the old ones.
  llvm::Error rebind();

  /// Kernels loaded, and how their cubins were had (cache or NVRTC).
  unsigned numKernels() const { return unsigned(Modules.size()); }
  const KernelStats &kernelStats() const { return Kernels; }
  /// The arena's size, and the allocations made besides it (workspaces,
  /// and any buffer the plan did not foresee).
  size_t arenaBytes() const { return ArenaBytes; }
  unsigned allocations() const {
    return unsigned(Owned.size() + InputBuffers.size());
  }
  /// Input V's own buffer (zeroed for prepare's launches, or uploaded),
  /// 0 once released.
  CUdeviceptr inputBuffer(const Value *V) const {
    auto It = InputBuffers.find(V);
    return It == InputBuffers.end() ? 0 : It->second;
  }
  /// Allocates input V a buffer of its own (again, after releaseInput),
  /// and binds V to it.
  llvm::Error allocInput(const Value *V);
  /// Frees input V's own buffer: the caller's is bound in its place. A
  /// launch must not read it afterwards (bind another buffer first).
  void releaseInput(const Value *V);
  /// The communicator over the graph's ranks (the runtime library's graph
  /// of several ranks): its collectives decided as `nccl` run through it
  /// on the backend's stream. The caller owns it.
  void setComm(const nccl::NcclApi &Api, nccl::ncclComm_t C) {
    Nc = &Api;
    NComm = C;
  }

private:
  /// The bytes of every buffer launchAll makes, each 256-byte aligned: the
  /// inputs, and each node's result that leaves its kernel.
  size_t plannedBytes() const;
  /// Allocates the arena once (plannedBytes()): the inputs and
  /// intermediates are carved from it rather than allocated one by one.
  llvm::Error reserveArena();
  /// Bytes from the arena, else an allocation of their own (Owned).
  llvm::Error allocBytes(size_t Bytes, CUdeviceptr &P, const llvm::Twine &What);
  llvm::Error alloc(const Value *V);
  /// Compiles, loads and launches K once (synchronously, so a fault names
  /// its kernel), and keeps the launch for replay.
  llvm::Error runKernel(llvm::Expected<KernelSource> KOr);
  llvm::Error runTemplate(const MultiTemplateBufferNode &M);
  llvm::Error runCollective(const CollectiveMultiTemplateBufferNode &C);
  /// C over the ranks through NCCL (setComm), kept for replay.
  llvm::Error runNcclCollective(const CollectiveMultiTemplateBufferNode &C);
  /// extern.cublas or extern.cublaslt_aN (CublasLtGemm.h), kept for replay.
  llvm::Error runCublas(const MultiTemplateBufferNode &M);
  /// An op unit's decided library choice (extern.cudnn).
  llvm::Error runOpUnitExtern(const MultiTemplateBufferNode &M);
  /// The merged GEMM of M's horizontal group, launched once, where the
  /// schedule reaches its first member; the others are then done.
  llvm::Error runHorizontal(const MultiTemplateBufferNode &M);
  llvm::Error runBuffer(const BufferNode &B);
  /// The kernel of B's fused group (B's alone if it is in none).
  llvm::Error runGroup(const BufferNode &B);
  /// Which nodes run inside another's kernel: template epilogues, and
  /// layout ops a group reads through.
  void findFusedNodes();
  std::string nextKernelName() const {
    return G.getName() + "_run_kernel" + std::to_string(Launched);
  }
  static int groupId(const BufferNode &B) {
    return B.getKernel() == BufferNode::NoKernel ? -1 - int(B.getIndex())
                                                 : B.getKernel();
  }

  const Graph &G;
  const RunIO &IO;
  Gpu &Gp;
  const DriverApi &D;
  int Arch;
  std::map<const Value *, CUdeviceptr> Dev;
  std::vector<CUdeviceptr> Owned;
  /// The graph inputs' buffers, apart from the arena so that each can be
  /// freed alone.
  std::map<const Value *, CUdeviceptr> InputBuffers;
  CUdeviceptr Arena = 0;
  size_t ArenaBytes = 0, ArenaUsed = 0;
  KernelStats Kernels;
  std::vector<CUmodule> Modules;
  std::vector<std::function<CUresult()>> Replay;
  /// What each kept kernel launch reads and writes, to rebind it.
  struct KernelLaunch {
    std::shared_ptr<
        std::pair<std::vector<CUtensorMap>, std::vector<CUdeviceptr>>>
        State;
    /// The value behind each pointer argument; null for the workspace.
    std::vector<const Value *> Vals;
    KernelSource Shape;
  };
  std::vector<KernelLaunch> Launches;
  /// Reshape results to the operand whose buffer they view.
  std::map<const Value *, const Value *> Alias;
  llvm::DenseSet<const Node *> Fused, InLayoutGroup;
  std::map<int, bool> GroupDone;
  /// Leaders of the horizontal groups already launched.
  llvm::DenseSet<const Node *> HorizontalDone;
  unsigned Launched = 0;
  const nccl::NcclApi *Nc = nullptr;
  nccl::ncclComm_t NComm = nullptr;
};

/// One run of the decided graph captured into a CUDA graph, as a deployed
/// model replays it (torch.compile's max-autotune does): no host dispatch
/// between launches. Null, with the reason in Why, where the driver lacks
/// graphs or a launch cannot be captured.
CUgraphExec captureGraph(Gpu &Gp,
                         std::vector<std::function<CUresult()>> &Replay,
                         std::string &Why);

} // namespace cuda
} // namespace mtsched

#endif // MTSCHED_LIB_BACKEND_CUDA_CUDAGRAPHRUN_H
