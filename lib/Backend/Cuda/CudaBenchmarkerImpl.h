//===- CudaBenchmarkerImpl.h - The cuda benchmarker (internal) -*- C++ -*-===//
//
// Internal to lib/Backend/Cuda: one rank's cuda session, which the cuda
// backend's Builder (it compiles) and Runner (it times) share, and the
// state it keeps per node. CudaBenchPrepare.cpp builds (kernels) and
// prepares (inputs, references), CudaBenchMeasure.cpp measures each kind of
// choice, CudaBenchRun.cpp checks and times a launch, and
// CudaBenchmarker.cpp opens the session and registers the backend.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_LIB_BACKEND_CUDA_CUDABENCHMARKERIMPL_H
#define MTSCHED_LIB_BACKEND_CUDA_CUDABENCHMARKERIMPL_H

#include "CudaCollective.h"
#include "CudaDevice.h"
#include "mtsched/Autotune/Builder.h"
#include "mtsched/Backend/Cuda/CudaBenchmarker.h"
#include "mtsched/IR/Layout.h"
#include "mtsched/Reference/DrawnValues.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/ThreadPool.h"
#include <functional>
#include <future>
#include <limits>
#include <map>
#include <memory>
#include <optional>

namespace mtsched {
namespace cuda {

/// Early stop of a losing choice: after this many samples, if every one is
/// slower than this factor times the node's best median so far.
inline constexpr size_t EarlyStopSamples = 3;
inline constexpr double EarlyStopFactor = 1.5;

struct DevBuf {
  CUdeviceptr P = 0;
  size_t Bytes = 0;
};

struct LoadedKernel {
  KernelSource K;
  std::string Error; // generation, compilation or load failure
  CUmodule Mod = nullptr;
  CUfunction Fn = nullptr;
  /// K's tensor maps per rotated input copy, encoded on first launch: the
  /// pointer parameters they were encoded over, and the maps.
  std::map<int, std::pair<std::vector<CUdeviceptr>, std::vector<CUtensorMap>>>
      Maps;
};

/// Kernels NVRTC compiles on another thread, loaded (loadCompiled) once
/// the GPU is open.
struct PendingKernels {
  std::vector<std::string> Keys;
  std::vector<std::shared_future<CompiledKernel>> Cubins;
};

/// Everything the choices of one node at one size share.
struct Prepared {
  /// Its kernels started compiling (compileAhead), and it is prepared.
  bool Compiling = false, Ready = false;
  std::vector<PendingKernels> Pending;
  int64_t Rows = 0, N = 0, K = 0;
  int Copies = 1;
  std::map<const Value *, std::vector<DevBuf>> Dev;
  /// What the host's reference reads, drawn on demand.
  DrawnValues Host;
  DevBuf OutMain[8], OutFused[8], OutEpi[8];
  /// Per copy, where a kernel writes outputs other than the measured one
  /// (an epilogue's `writes` list).
  std::map<const Value *, std::vector<DevBuf>> Scratch;
  /// Global scratch memory of kernels that ask for it (attn_math's scores),
  /// shared by the choices: they run one at a time.
  DevBuf Workspace;
  std::vector<int64_t> CheckRows;
  std::vector<std::vector<double>> RefMain, RefFused, RefEpi;
  /// The element maps of the epilogue's layout ops (a matmul's epilogue
  /// through a reshape or transpose), in order: the fused and the epilogue
  /// kernel store the template's element I at the maps' image of I, so
  /// their check reads each sampled row's elements there.
  std::vector<ElementMap> OutMaps;
  /// The sampled rows of each `writes` value as the fused kernel (from the
  /// GEMM's rows) and the epilogue kernel (from its random input) compute
  /// them: checked like the last output.
  std::map<const Value *, std::vector<std::vector<double>>> RefWritesFused,
      RefWritesEpi;
  /// The fastest median so far of the node's choices, unfused and fused.
  double BestUs[2] = {Inf, Inf};
  std::map<std::string, LoadedKernel> Kernels;
  std::string Error;
};

/// Whether Name is a matmul's cuBLAS or cuBLASLt choice (blasLaunch's).
bool isBlasChoice(llvm::StringRef Name);

/// The launch of Name (`extern.cublas` or `extern.cublaslt_aN`) for the
/// matmul N on P's copies of its operands into P.OutMain, or, Fused, with
/// N's bias / residual epilogue (cuBLASLt only) into P.OutFused (copy
/// modulo P.Copies); null, with Why set, where it cannot run (a failed
/// choice).
std::function<CUresult(int)> blasLaunch(Gpu &G, Prepared &P,
                                        const MultiTemplateBufferNode &N,
                                        llvm::StringRef Name, bool Fused,
                                        std::string &Why);

/// The kernels of one built choice (unfused and fused), compiling on the
/// NVRTC pool, and those of the rest of its node's build (the other
/// choices', the epilogue's): waiting for a node's artifacts waits for
/// everything its build started.
class CudaArtifact : public Artifact {
public:
  std::vector<std::shared_future<CompiledKernel>> Cubins;
  std::vector<std::shared_future<CompiledKernel>> NodeCubins;
  /// The first of Cubins' failures.
  std::string wait() const override;
};

/// One rank's cuda backend: the GPU, each node's prepared state and the
/// NVRTC pool. Its builder calls build(), its runner measure() and
/// measureEpilogue(), all on the rank's thread.
class CudaSession {
public:
  CudaSession(const AutotuneOptions &Opts, int Rank, Communicator &Comm)
      : Comm(&Comm), Opts(Opts), Rank(Rank) {}
  ~CudaSession();

  /// Starts compiling the kept choices' kernels of every GEMM-like input
  /// (compileAhead) and returns their artifacts, or why a choice has no
  /// kernel; for a collective over every rank, starts NCCL's communicator
  /// (CollectiveRank::startSetUp).
  std::vector<BuiltChoices> build(llvm::ArrayRef<BuildInput> Batch);
  /// A choice not built ahead is compiled when it is measured.
  Measurement measure(const MultiTemplateBufferNode &N, const Workload &W,
                      const Choice &C, bool Fused);
  Measurement measureEpilogue(const MultiTemplateBufferNode &N,
                              const Workload &W);
  /// Runner::measureForms: each kernel measured first (checked against
  /// fp64), then the forms timed interleaved (CudaBenchForms.cpp).
  std::vector<Measurement>
  measureForms(llvm::ArrayRef<std::vector<FormKernel>> Forms,
               const SustainedProtocol &P);

private:
  /// measureForms' timing of each form's launches (G's lock held).
  std::vector<Measurement> timeForms(
      const std::vector<std::vector<std::function<CUresult(int)>>> &Launches,
      const SustainedProtocol &P);
  /// N's state at W's size, created empty on first use.
  Prepared &slot(const MultiTemplateBufferNode &N, const Workload &W);
  /// Prepares N at W's size once: inputs, references, kernels.
  Prepared &prepare(const MultiTemplateBufferNode &N, const Workload &W);
  // prepare()'s steps; each says why it failed in P.Error.
  /// The main, fused and epilogue outputs of every copy.
  bool allocOutputs(const MultiTemplateBufferNode &N, Prepared &P);
  /// A buffer per copy for each of the epilogue's `writes`.
  bool allocWriteBuffers(const MultiTemplateBufferNode &N, Prepared &P);
  /// A GEMM's (or SwiGLU's) own reference rows on the GPU, from its device
  /// inputs of copy 0, into P.RefMain.
  bool gpuReferenceRows(const MultiTemplateBufferNode &N, Prepared &P,
                        BenchSupport &Support);
  /// Starts compiling N's kernels (the choices Want accepts, by index)
  /// before the GPU is open: NVRTC then runs while the context is created
  /// and the inputs are filled. Needs only the device's attributes. Does
  /// nothing if N at W's size was compiled or prepared already.
  void compileAhead(const MultiTemplateBufferNode &N, const Workload &W,
                    llvm::function_ref<bool(size_t)> Want);
  /// build() of one node: its choices' results.
  BuiltChoices buildNode(const BuildInput &In);
  /// Generates the kernels of the choices Want accepts (by index) that P
  /// has none of yet, for device Info, and starts one parallel NVRTC batch
  /// of them on another thread.
  void startCompile(const MultiTemplateBufferNode &N, Prepared &P,
                    const DeviceInfo &Info, const DriverApi &D,
                    llvm::function_ref<bool(size_t)> Want);
  /// Waits for P's batches and loads their kernels (the GPU is open).
  void loadCompiled(Prepared &P);
  /// startCompile, then loadCompiled.
  void compileChoices(const MultiTemplateBufferNode &N, Prepared &P,
                      llvm::function_ref<bool(size_t)> Want);
  LoadedKernel *kernel(Prepared &P, const std::string &Key);
  /// Checks then times Launch(copy); Out holds the output per copy.
  /// Best, if given, is the fastest median of the node's choices so far
  /// (updated): a choice whose first samples are all slower than
  /// EarlyStopFactor x Best cannot win and stops being timed. With Extra,
  /// the kernel K's outputs before its last (its epilogue's `writes`) are
  /// checked too, against Extra's rows.
  Measurement
  run(const std::function<CUresult(int)> &Launch, Prepared &P,
      const DevBuf *Out, DType OutType,
      const std::vector<std::vector<double>> &Ref, double *Best = nullptr,
      const KernelSource *K = nullptr,
      const std::map<const Value *, std::vector<std::vector<double>>> *Extra =
          nullptr);
  /// measure() of a collective on one rank: a device-to-device copy of its
  /// input (an uneven all_to_all's kept rows, the rest zeroed). The caller
  /// holds the GPU's lock, its context current.
  /// Times an op unit's library choice C of N (extern.cudnn) on P's
  /// buffers, its result checked like a kernel's.
  Measurement measureOpUnitExtern(const MultiTemplateBufferNode &N,
                                  const Choice &C, Prepared &P);
  Measurement measureOneRankCopy(const MultiTemplateBufferNode &N,
                                 const Workload &W, const Choice &C);
  /// An output of a kernel checked beside its last: its buffer of copy 0
  /// and its reference rows.
  struct CheckedOutput {
    const Value *V;
    const DevBuf *Buf;
    const std::vector<std::vector<double>> *Rows;
  };
  /// run()'s check: poisons the outputs, runs copy 0 once and compares the
  /// sampled rows with Ref (and Others with theirs); the failure, or none.
  std::optional<Measurement>
  checkRun(const std::function<CUresult(int)> &Launch, Prepared &P,
           const DevBuf *Out, DType OutType,
           const std::vector<std::vector<double>> &Ref,
           llvm::ArrayRef<CheckedOutput> Others, const std::string &Running);
  /// run()'s timing: warm-up, an estimate that sizes the samples, then the
  /// samples (replayed from a CUDA graph where one captures); Best as run().
  Measurement timeRun(const std::function<CUresult(int)> &Launch, Prepared &P,
                      double *Best, const std::string &Running);
  CUresult launch(LoadedKernel &L, Prepared &P, const DevBuf *Out, int Copy);

public:
  /// The rank's communicator (multi-rank collectives need it).
  Communicator *Comm = nullptr;
  /// Multi-rank collectives, one GPU per rank (created on first use).
  std::unique_ptr<CollectiveRank> Coll;
  /// The kernels this benchmarker compiled or read from the cache.
  KernelStats Stats;

  std::vector<std::pair<std::string, int64_t>> getCounters() const {
    return {{"compiled", Stats.Compiled.load()},
            {"cached", Stats.Cached.load()},
            {"failed", Stats.Failed.load()},
            {"compile_ms", int64_t(Stats.CompileMs.load())}};
  }

private:
  const AutotuneOptions &Opts;
  int Rank;
  /// The GPU, opened by the first measurement: a run whose every decision
  /// replays from the autotune cache never creates a CUDA context.
  Gpu *G = nullptr;
  /// Opens G if needed; why it cannot be, or empty.
  std::string openGpu();
  std::map<std::pair<const MultiTemplateBufferNode *, int64_t>,
           std::unique_ptr<Prepared>>
      Cache;
  /// NVRTC's threads (compileThreads), created by the first compile. Last:
  /// destroyed (joined) first, before what its tasks use.
  std::unique_ptr<llvm::DefaultThreadPool> Compiler;
};

/// The name a choice's kernel is kept under.
inline std::string keyOf(const std::string &Choice, bool Fused) {
  return Choice + (Fused ? "+fused" : "");
}

} // namespace cuda
} // namespace mtsched

#endif // MTSCHED_LIB_BACKEND_CUDA_CUDABENCHMARKERIMPL_H
