//===- CudaPreparedGraph.cpp - A decided graph for the runtime library ----===//
//
// prepareGraphOnGpu: the runtime library's (RuntimeApi.h) decided graph on
// the GPU, run on the caller's buffers and stream and replayed as a CUDA
// graph captured per binding; GraphRun (CudaGraphRun.h) does the work.
//
//===----------------------------------------------------------------------===//
#include "CudaGraphRun.h"
#include <cstring>

using namespace mtsched;
using namespace mtsched::cuda;

static llvm::Error err(const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Msg);
}

namespace {

/// A decided graph prepared for the runtime library (prepareGraphOnGpu).
/// Its GraphRun owns a buffer per value (one arena) and per input (freed
/// once the caller's is bound), on which every kernel was launched once. A run
/// binds the caller's pointers in their place and replays a CUDA graph captured
/// for that binding on the caller's stream. A few bindings are kept, each with
/// its graph: a caller that returns fresh outputs from PyTorch's caching
/// allocator alternates between two or three addresses, and each then replays
/// without a copy. A pointer that is not aligned for the kernels' vector and
/// TMA accesses, or that keeps moving once MaxCaptures graphs were captured, is
/// staged: copied through the GraphRun's own buffer from then on, so that
/// capturing stops.
class CudaPreparedGraph : public PreparedGraph {
public:
  /// Captured graphs kept, one per binding, the least recently used
  /// dropped first.
  static constexpr size_t MaxGraphs = 4;
  /// Captures after which a moving pointer is staged instead.
  static constexpr unsigned MaxCaptures = 16;

  CudaPreparedGraph(const Graph &G, const RunIO &IO, Gpu &Gp)
      : G(G), IO(IO), Gp(Gp), Run(G, this->IO, Gp) {}
  ~CudaPreparedGraph() override {
    std::lock_guard<std::mutex> Lock(Gp.Mu);
    // The buffers and modules are freed in the device's context, whichever
    // thread lets the graph go.
    llvm::consumeError(makeCurrent(Gp.Info));
    for (Kept &K : Graphs)
      if (K.Exec)
        Gp.D->cuGraphExecDestroy(K.Exec);
    if (NComm) {
      // Nothing of this graph may still run on the communicator.
      syncStream(*Gp.D, Gp.Stream, "@" + G.getName());
      Nc->ncclCommDestroy(NComm);
    }
  }

  /// The communicator over the graph's ranks: every rank calls this at
  /// the same time (ncclCommInitRank waits for all of them), with the id
  /// rank 0 made (RunIO::CommId).
  llvm::Error openComm() {
    llvm::Expected<const nccl::NcclApi &> NOr = nccl::loadNccl();
    if (!NOr)
      return NOr.takeError();
    Nc = &*NOr;
    nccl::ncclUniqueId Id;
    if (IO.CommId.size() != sizeof(Id.Internal))
      return err("the communicator's id has " +
                 std::to_string(IO.CommId.size()) + " bytes, NCCL's " +
                 std::to_string(sizeof(Id.Internal)));
    std::memcpy(Id.Internal, IO.CommId.data(), sizeof(Id.Internal));
    if (nccl::ncclResult_t R =
            Nc->ncclCommInitRank(&NComm, int(G.getWorldSize()), Id, IO.Rank)) {
      NComm = nullptr;
      return err("ncclCommInitRank (rank " + std::to_string(IO.Rank) + " of " +
                 std::to_string(G.getWorldSize()) + "): " + Nc->errorString(R));
    }
    Run.setComm(*Nc, NComm);
    return llvm::Error::success();
  }

  llvm::Error prepare() {
    if (G.getWorldSize() > 1)
      if (llvm::Error E = openComm())
        return E;
    if (llvm::Error E = Run.zeroInputs())
      return E;
    if (llvm::Error E = Run.launchAll())
      return E;
    for (const auto &In : G.getInputs())
      Ins.push_back({In.get(), Run.devicePtr(In.get())});
    // An output bound to the caller's buffer must be a buffer a kernel
    // writes, returned once; a graph input, a reshape's view or a value
    // returned twice is always copied out.
    std::map<const Value *, unsigned> Returned;
    for (const Operand &O : G.getOutputs())
      ++Returned[O.V];
    for (const Operand &O : G.getOutputs()) {
      Slot S{O.V, Run.resolve(O.V)};
      S.Staged = O.V->isGraphInput() || Run.isAlias(O.V) || Returned[O.V] > 1 ||
                 !S.Own;
      Outs.push_back(S);
    }
    return llvm::Error::success();
  }

  int64_t stat(llvm::StringRef Name) const override {
    auto Staged = [](const std::vector<Slot> &Xs) {
      return int64_t(
          llvm::count_if(Xs, [](const Slot &X) { return X.Staged; }));
    };
    return llvm::StringSwitch<int64_t>(Name)
        .Case("kernels", Run.numKernels())
        .Case("kernels_cached", Run.kernelStats().Cached.load())
        .Case("kernels_compiled", Run.kernelStats().Compiled.load())
        .Case("captures", Captures)
        .Case("graphs_kept", int64_t(Graphs.size()))
        .Case("staged_inputs", Staged(Ins))
        .Case("staged_outputs", Staged(Outs))
        .Case("arena_bytes", int64_t(Run.arenaBytes()))
        .Case("allocations", Run.allocations())
        .Default(-1);
  }

  llvm::Error run(const void *const *Inputs, void *const *Outputs,
                  void *Stream) override {
    std::lock_guard<std::mutex> Lock(Gp.Mu);
    if (llvm::Error E = makeCurrent(Gp.Info))
      return E;
    const DriverApi &D = *Gp.D;
    CUstream S = static_cast<CUstream>(Stream);
    for (size_t I = 0; I < Ins.size(); ++I)
      if (!Inputs[I])
        return err("input '%" + Ins[I].V->getName() + "' is null");
    for (size_t I = 0; I < Outs.size(); ++I)
      if (!Outputs[I])
        return err("output '%" + Outs[I].V->getName() + "' is null");
    auto Ptr = [&](size_t I) {
      return reinterpret_cast<CUdeviceptr>(
          I < Ins.size() ? Inputs[I] : Outputs[I - Ins.size()]);
    };
    auto SlotAt = [&](size_t I) -> Slot & {
      return I < Ins.size() ? Ins[I] : Outs[I - Ins.size()];
    };
    size_t N = Ins.size() + Outs.size();
    // The binding this run asks for: each caller pointer, 0 where staged.
    auto MakeKey = [&] {
      std::vector<CUdeviceptr> Key(N, 0);
      for (size_t I = 0; I < N; ++I) {
        Slot &X = SlotAt(I);
        X.Staged |= Ptr(I) % 256 != 0;
        Key[I] = X.Staged ? 0 : Ptr(I);
      }
      return Key;
    };
    std::vector<CUdeviceptr> Key = MakeKey();
    Kept *K = find(Key);
    if (!K && Captures >= MaxCaptures && !Graphs.empty()) {
      // The binding keeps moving: stage what moved since the last graph
      // used, so that this is the last capture for it.
      const Kept &Last = *llvm::max_element(
          Graphs, [](const Kept &A, const Kept &B) { return A.Used < B.Used; });
      for (size_t I = 0; I < N; ++I)
        if (Key[I] != Last.Key[I])
          SlotAt(I).Staged = true;
      Key = MakeKey();
      K = find(Key);
    }
    if (!K) {
      // A staged input whose buffer was released (bound before) gets one
      // again: it is copied through it from now on.
      for (Slot &X : Ins)
        if (X.Staged && !X.Own) {
          if (llvm::Error E = Run.allocInput(X.V))
            return E;
          X.Own = Run.inputBuffer(X.V);
        }
      if (llvm::Error E = bindAndCapture(Key))
        return E;
      K = &Graphs.back();
    }
    K->Used = ++Clock;
    for (size_t I = 0; I < Ins.size(); ++I)
      if (Ins[I].Staged)
        if (CUresult R = D.cuMemcpyDtoDAsync(Ins[I].Own, Ptr(I),
                                             Ins[I].V->getType().numBytes(), S))
          return err("cannot copy input '%" + Ins[I].V->getName() +
                     "': " + D.errorString(R));
    if (K->Exec) {
      if (CUresult R = D.cuGraphLaunch(K->Exec, S))
        return err("cannot launch the graph of @" + G.getName() + ": " +
                   D.errorString(R));
    } else {
      // No CUDA graph (NoGraphWhy): the launches go to the backend's
      // stream, after the caller's work and before what the caller queues
      // next, by waiting for both. They read the GraphRun's binding, which
      // must be this run's.
      if (Bound != Key)
        if (llvm::Error E = bind(Key))
          return E;
      if (CUresult R = syncStream(D, S, "the caller's stream"))
        return err("the caller's stream failed: " + D.errorString(R));
      for (auto &F : Run.replay())
        if (CUresult R = F())
          return err("a launch of @" + G.getName() +
                     " failed: " + D.errorString(R));
      if (CUresult R = syncStream(D, Gp.Stream, "@" + G.getName()))
        return err("@" + G.getName() + " failed: " + D.errorString(R));
    }
    for (size_t I = 0; I < Outs.size(); ++I)
      if (Outs[I].Staged)
        if (CUresult R = D.cuMemcpyDtoDAsync(
                reinterpret_cast<CUdeviceptr>(Outputs[I]), K->From[I],
                Outs[I].V->getType().numBytes(), S))
          return err("cannot copy output '%" + Outs[I].V->getName() +
                     "': " + D.errorString(R));
    // An input bound to the caller's buffer no longer needs its own (a
    // weight would take its memory twice): no kept graph reads it, as none
    // was captured with that input staged.
    for (size_t I = 0; I < Ins.size(); ++I)
      if (Key[I] && Ins[I].Own) {
        Run.releaseInput(Ins[I].V);
        Ins[I].Own = 0;
      }
    return llvm::Error::success();
  }

private:
  /// A graph input or output and how it is bound.
  struct Slot {
    const Value *V;
    /// The GraphRun's own buffer for it: an output's in the arena, an
    /// input's apart, released (0) once the caller's is bound.
    CUdeviceptr Own;
    /// Copied through Own on every run.
    bool Staged = false;
  };
  /// A binding and the CUDA graph captured for it.
  struct Kept {
    std::vector<CUdeviceptr> Key;
    /// Null where the capture failed (NoGraphWhy).
    CUgraphExec Exec = nullptr;
    /// Where each staged output is copied from under this binding (an
    /// output viewing an input's buffer follows that input's binding).
    std::vector<CUdeviceptr> From;
    uint64_t Used = 0;
  };

  Kept *find(const std::vector<CUdeviceptr> &Key) {
    for (Kept &K : Graphs)
      if (K.Key == Key)
        return &K;
    return nullptr;
  }

  /// Puts Key's pointers (Own where 0) in the GraphRun's launches.
  llvm::Error bind(const std::vector<CUdeviceptr> &Key) {
    for (size_t I = 0; I < Key.size(); ++I) {
      bool IsOut = I >= Ins.size();
      const Slot &X = IsOut ? Outs[I - Ins.size()] : Ins[I];
      // A staged output that is a graph input or a view is copied from
      // wherever its value is: binding it would rebind that value.
      if (IsOut && !Key[I] && (X.V->isGraphInput() || Run.isAlias(X.V)))
        continue;
      Run.bind(X.V, Key[I] ? Key[I] : X.Own);
    }
    Bound = Key;
    return Run.rebind();
  }

  /// Binds Key and captures its graph, dropping the least recently used
  /// one beyond MaxGraphs.
  llvm::Error bindAndCapture(const std::vector<CUdeviceptr> &Key) {
    if (llvm::Error E = bind(Key))
      return E;
    if (Graphs.size() >= MaxGraphs) {
      auto Old = llvm::min_element(
          Graphs, [](const Kept &A, const Kept &B) { return A.Used < B.Used; });
      if (Old->Exec)
        Gp.D->cuGraphExecDestroy(Old->Exec);
      Graphs.erase(Old);
    }
    Kept K;
    K.Key = Key;
    K.Exec = captureGraph(Gp, Run.replay(), NoGraphWhy);
    for (const Slot &X : Outs)
      K.From.push_back(Run.resolve(X.V));
    ++Captures;
    Graphs.push_back(std::move(K));
    return llvm::Error::success();
  }

  const Graph &G;
  const RunIO IO;
  Gpu &Gp;
  GraphRun Run;
  std::vector<Slot> Ins, Outs;
  std::vector<Kept> Graphs;
  /// The binding the GraphRun's launches hold now.
  std::vector<CUdeviceptr> Bound;
  uint64_t Clock = 0;
  unsigned Captures = 0;
  std::string NoGraphWhy;
  const nccl::NcclApi *Nc = nullptr;
  nccl::ncclComm_t NComm = nullptr;
};

} // namespace

llvm::Expected<std::unique_ptr<PreparedGraph>>
mtsched::prepareGraphOnGpu(const Graph &G, const RunIO &IO) {
  if (G.getWorldSize() > 1 &&
      (IO.Rank < 0 || IO.Rank >= int(G.getWorldSize()) || IO.CommId.empty()))
    return err("@" + G.getName() + " has " + std::to_string(G.getWorldSize()) +
               " ranks: give this process's rank and the communicator's id");
  llvm::Expected<Gpu &> GOr = gpu(IO.Device);
  if (!GOr)
    return err("the cuda device: " + llvm::toString(GOr.takeError()));
  Gpu &Gp = *GOr;
  // The process opens one device, the first asked for.
  if (Gp.Info.Ordinal != IO.Device)
    return err("this process runs on cuda device " +
               std::to_string(Gp.Info.Ordinal) + ", not " +
               std::to_string(IO.Device) + " (one device per process)");
  std::lock_guard<std::mutex> Lock(Gp.Mu);
  if (llvm::Error E = makeCurrent(Gp.Info))
    return std::move(E);
  auto P = std::make_unique<CudaPreparedGraph>(G, IO, Gp);
  if (llvm::Error E = P->prepare())
    return std::move(E);
  return std::unique_ptr<PreparedGraph>(std::move(P));
}
