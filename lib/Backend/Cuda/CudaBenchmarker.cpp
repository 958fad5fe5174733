//===- CudaBenchmarker.cpp - Timing choices on a CUDA GPU -----------------===//
//
// For each multi-template buffer (at its size or a size hint) the first
// measurement prepares everything the node's choices need: seeded random
// inputs (rotated copies so that back-to-back launches do not hit a warm
// L2), the fp64 reference of a sample of output rows, and every choice's
// kernel, generated and compiled at once on the compile thread pool. Each
// measurement then checks the choice's output against the reference and
// times it: warm-up, then BenchRuns samples, each many back-to-back
// launches between two events divided by their count, the L2 flushed
// before each sample; the median counts.
//
//===----------------------------------------------------------------------===//
#include "mtsched/Backend/Cuda/CudaBenchmarker.h"
#include "CudaCollective.h"
#include "mtsched/Autotune/Interpreter.h"
#include "mtsched/Autotune/Npy.h"
#include "mtsched/Autotune/RandomInputs.h"
#include "mtsched/Backend/Cuda/AttentionCodegen.h"
#include "mtsched/Backend/Cuda/CudaApi.h"
#include "mtsched/Backend/Cuda/CudaBenchSupport.h"
#include "mtsched/Backend/Cuda/CudaCodegen.h"
#include "mtsched/Backend/Cuda/CudaCompiler.h"
#include "mtsched/Schedule/Schedule.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/TimeProfiler.h"
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <random>

using namespace mtsched;
using namespace mtsched::cuda;

static constexpr double Inf = std::numeric_limits<double>::infinity();
/// Early stop of a losing choice: after this many samples, if every one is
/// slower than this factor times the node's best median so far.
static constexpr size_t EarlyStopSamples = 3;
static constexpr double EarlyStopFactor = 1.5;

static llvm::Error err(const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Msg);
}

namespace {

/// The process's one GPU session; ranks (threads) take turns through Mu.
struct Gpu {
  DeviceInfo Info;
  const DriverApi *D = nullptr;
  CUstream Stream = nullptr;
  CUevent E0 = nullptr, E1 = nullptr;
  CUdeviceptr Flush = 0;
  size_t FlushBytes = 0;
  cublasHandle_t Blas = nullptr;
  const CublasApi *B = nullptr;
  std::string BlasError;
  /// Fills and fp64 references on the GPU, loaded on first use (under Mu);
  /// if they cannot load, inputs are drawn and checked on the host.
  std::unique_ptr<BenchSupport> Support;
  bool SupportTried = false;
  std::mutex Mu;
};

/// G's support kernels, loading them on the first call; null (said once on
/// stderr) if they cannot load.
BenchSupport *support(Gpu &G) {
  if (!G.SupportTried) {
    G.SupportTried = true;
    llvm::Expected<std::unique_ptr<BenchSupport>> S =
        BenchSupport::load(*G.D, G.Info.Major * 10 + G.Info.Minor);
    if (S)
      G.Support = std::move(*S);
    else
      llvm::errs() << "mtsched-opt: warning: " << llvm::toString(S.takeError())
                   << "; benchmark inputs are drawn and checked on the host "
                      "(slower)\n";
  }
  return G.Support.get();
}

/// The first call opens GPU Ordinal (modulo the device count).
llvm::Expected<Gpu &> gpu(int Ordinal) {
  static Gpu G;
  static std::string Error;
  static std::once_flag Once;
  std::call_once(Once, [Ordinal] {
    llvm::TimeTraceScope Scope("cuda.open-device");
    llvm::Expected<DeviceInfo> Info =
        openDevice(Ordinal % std::max(1, deviceCount()));
    if (!Info) {
      Error = llvm::toString(Info.takeError());
      return;
    }
    if (auto N = loadNvrtc(); !N) {
      Error = llvm::toString(N.takeError());
      return;
    }
    G.Info = *Info;
    G.D = &*loadDriver();
    if (CUresult R = G.D->cuStreamCreate(&G.Stream, CU_STREAM_NON_BLOCKING)) {
      Error = "cannot create a CUDA stream: " + G.D->errorString(R);
      return;
    }
    G.D->cuEventCreate(&G.E0, CU_EVENT_DEFAULT);
    G.D->cuEventCreate(&G.E1, CU_EVENT_DEFAULT);
    G.FlushBytes = size_t(std::max(G.Info.L2Bytes, 1 << 20)) * 2;
    if (G.D->cuMemAlloc(&G.Flush, G.FlushBytes))
      G.Flush = 0;
    llvm::Expected<const CublasApi &> B = loadCublas();
    if (!B) {
      G.BlasError = llvm::toString(B.takeError());
    } else if (int S = B->cublasCreate(&G.Blas)) {
      G.BlasError = "cublasCreate failed with status " + std::to_string(S);
    } else {
      G.B = &*B;
      B->cublasSetStream(G.Blas, G.Stream);
    }
  });
  if (!Error.empty())
    return err(Error);
  return G;
}

struct DevBuf {
  CUdeviceptr P = 0;
  size_t Bytes = 0;
};

struct LoadedKernel {
  KernelSource K;
  std::string Error; // generation, compilation or load failure
  CUmodule Mod = nullptr;
  CUfunction Fn = nullptr;
  /// K's tensor maps per rotated input copy, encoded on first launch.
  std::map<int, std::vector<CUtensorMap>> Maps;
};

/// Everything the choices of one node at one size share.
struct Prepared {
  int64_t Rows = 0, N = 0, K = 0;
  int Copies = 1;
  std::map<const Value *, std::vector<DevBuf>> Dev;
  ValueData Host;
  DevBuf OutMain[8], OutFused[8], OutEpi[8];
  /// Per copy, where a kernel writes outputs other than the measured one
  /// (an epilogue's `writes` list).
  std::map<const Value *, std::vector<DevBuf>> Scratch;
  /// Global scratch memory of kernels that ask for it (attn_math's scores),
  /// shared by the choices: they run one at a time.
  DevBuf Workspace;
  std::vector<int64_t> CheckRows;
  std::vector<std::vector<double>> RefMain, RefFused, RefEpi;
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

/// Why kernel K cannot run on device Info, or empty if it can.
std::string unsupportedReason(const KernelSource &K, const DeviceInfo &Info,
                              const DriverApi &D) {
  if (!K.NeedsSm90a)
    return "";
  // sm_90a code runs on compute capability 9.0 only.
  if (Info.Major != 9 || Info.Minor != 0)
    return "needs an sm_90 GPU (wgmma, TMA); " + Info.Name + " is sm_" +
           std::to_string(Info.Major) + std::to_string(Info.Minor);
  if (!K.TensorMaps.empty() && !D.cuTensorMapEncodeTiled)
    return "the CUDA driver lacks cuTensorMapEncodeTiled (TMA)";
  return "";
}

/// Encodes K's tensor maps over its inputs at Ptrs (K.Inputs order).
CUresult encodeTensorMaps(const DriverApi &D, const KernelSource &K,
                          llvm::ArrayRef<CUdeviceptr> Ptrs,
                          std::vector<CUtensorMap> &Out) {
  Out.assign(K.TensorMaps.size(), CUtensorMap());
  const uint32_t ElementStrides[3] = {1, 1, 1};
  for (size_t I = 0; I < K.TensorMaps.size(); ++I) {
    const TensorMapParam &T = K.TensorMaps[I];
    if (CUresult R = D.cuTensorMapEncodeTiled(
            &Out[I], CU_TENSOR_MAP_DATA_TYPE_UINT16, 3,
            reinterpret_cast<void *>(Ptrs[T.Input]), T.Dims, T.Strides, T.Box,
            ElementStrides, CU_TENSOR_MAP_INTERLEAVE_NONE,
            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE))
      return R;
  }
  return CUDA_SUCCESS;
}

Measurement failed(ChoiceStatus S, std::string Msg) {
  Measurement M;
  M.Status = S;
  M.Us = Inf;
  M.Message = std::move(Msg);
  return M;
}

std::vector<double> toHostValues(const std::string &Bytes, DType T) {
  size_t Elt = dtypeBytes(T), N = Bytes.size() / Elt;
  std::vector<double> Out(N);
  parallelChunks(int64_t(N), [&](int64_t Begin, int64_t End) {
    for (size_t I = Begin; I < size_t(End); ++I) {
      const char *P = Bytes.data() + I * Elt;
      uint16_t H;
      float F;
      switch (T) {
      case DType::BF16:
        std::memcpy(&H, P, 2);
        Out[I] = bf16ToFloat(H);
        break;
      case DType::F16:
        std::memcpy(&H, P, 2);
        Out[I] = f16ToFloat(H);
        break;
      case DType::F32:
        std::memcpy(&F, P, 4);
        Out[I] = F;
        break;
      case DType::I32: {
        int32_t V;
        std::memcpy(&V, P, 4);
        Out[I] = V;
        break;
      }
      case DType::I64: {
        int64_t V;
        std::memcpy(&V, P, 8);
        Out[I] = double(V);
        break;
      }
      }
    }
  });
  return Out;
}

std::string toDeviceBytes(const std::vector<double> &V, DType T) {
  size_t Elt = dtypeBytes(T);
  std::string Out(V.size() * Elt, '\0');
  parallelChunks(int64_t(V.size()), [&](int64_t Begin, int64_t End) {
    for (size_t I = Begin; I < size_t(End); ++I) {
      char *P = &Out[I * Elt];
      uint16_t H;
      float F = float(V[I]);
      switch (T) {
      case DType::BF16:
        H = floatToBF16(F);
        std::memcpy(P, &H, 2);
        break;
      case DType::F16:
        H = floatToF16(F);
        std::memcpy(P, &H, 2);
        break;
      case DType::F32:
        std::memcpy(P, &F, 4);
        break;
      case DType::I32: {
        int32_t X = int32_t(V[I]);
        std::memcpy(P, &X, 4);
        break;
      }
      case DType::I64: {
        int64_t X = int64_t(V[I]);
        std::memcpy(P, &X, 8);
        break;
      }
      }
    }
  });
  return Out;
}

/// Relative error ||out - ref|| / ||ref|| of the checked rows, or +inf if
/// any element is not finite where the reference is.
double relError(const std::vector<double> &Out, int64_t N,
                llvm::ArrayRef<int64_t> Rows,
                const std::vector<std::vector<double>> &Ref) {
  double E2 = 0, R2 = 0;
  for (size_t I = 0; I < Rows.size(); ++I)
    for (int64_t C = 0; C < N; ++C) {
      double O = Out[Rows[I] * N + C], R = Ref[I][C];
      if (!std::isfinite(O) && std::isfinite(R))
        return Inf;
      E2 += (O - R) * (O - R);
      R2 += R * R;
    }
  return R2 > 0 ? std::sqrt(E2 / R2) : std::sqrt(E2);
}

double tolerance(DType T) {
  switch (T) {
  case DType::BF16:
    return 2e-2;
  case DType::F16:
    return 5e-3;
  default:
    return 1e-3;
  }
}

class CudaBenchmarker : public Benchmarker {
public:
  CudaBenchmarker(const AutotuneOptions &Opts, int Rank, Communicator &Comm)
      : Comm(&Comm), Opts(Opts), Rank(Rank) {}
  ~CudaBenchmarker() override;

  llvm::StringRef getBackendName() const override { return "cuda"; }

  Measurement measure(const MultiTemplateBufferNode &N, const Workload &W,
                      const Choice &C, bool Fused) override;
  Measurement measureEpilogue(const MultiTemplateBufferNode &N,
                              const Workload &W) override;

private:
  Prepared &prepare(const MultiTemplateBufferNode &N, const Workload &W);
  void precompile(const MultiTemplateBufferNode &N, Prepared &P);
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
  CUresult launch(LoadedKernel &L, Prepared &P, const DevBuf *Out, int Copy);

public:
  /// The rank's communicator (multi-rank collectives need it).
  Communicator *Comm = nullptr;
  /// Multi-rank collectives, one GPU per rank (created on first use).
  std::unique_ptr<CollectiveRank> Coll;

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
};

} // namespace

std::string CudaBenchmarker::openGpu() {
  if (G)
    return std::string();
  llvm::Expected<Gpu &> GOr = gpu(Opts.GpuOrdinal);
  if (!GOr)
    return "the cuda backend cannot run here: " +
           llvm::toString(GOr.takeError());
  G = &*GOr;
  return std::string();
}

CudaBenchmarker::~CudaBenchmarker() {
  if (!G)
    return;
  std::lock_guard<std::mutex> Lock(G->Mu);
  if (makeCurrent(G->Info))
    return;
  for (auto &KV : Cache) {
    Prepared &P = *KV.second;
    for (auto *Bufs : {&P.Dev, &P.Scratch})
      for (auto &D : *Bufs)
        for (DevBuf &B : D.second)
          G->D->cuMemFree(B.P);
    for (int I = 0; I < 8; ++I)
      for (DevBuf *B : {&P.OutMain[I], &P.OutFused[I], &P.OutEpi[I]})
        if (B->P)
          G->D->cuMemFree(B->P);
    if (P.Workspace.P)
      G->D->cuMemFree(P.Workspace.P);
    for (auto &K : P.Kernels)
      if (K.second.Mod)
        G->D->cuModuleUnload(K.second.Mod);
  }
}

static std::string keyOf(const std::string &Choice, bool Fused) {
  return Choice + (Fused ? "+fused" : "");
}

void CudaBenchmarker::precompile(const MultiTemplateBufferNode &N,
                                 Prepared &P) {
  std::vector<std::string> Keys;
  std::vector<CompileJob> Jobs;
  auto Add = [&](const std::string &Key, llvm::Expected<KernelSource> K) {
    LoadedKernel &L = P.Kernels[Key];
    if (!K) {
      L.Error = "no kernel: " + llvm::toString(K.takeError());
      return;
    }
    L.K = std::move(*K);
    L.Error = unsupportedReason(L.K, G->Info, *G->D);
    if (!L.Error.empty())
      return;
    Keys.push_back(Key);
    Jobs.push_back({L.K.Name, L.K.Source, L.K.NeedsSm90a});
  };
  bool HasEpi = !N.getEpilogue().empty();
  for (const Choice &C : N.getChoices()) {
    if (N.getOp() == OpCode::SwiGlu) {
      if (std::optional<GemmTileConfig> T = swigluTileOf(C))
        Add(keyOf(C.Name, false), generateSwiGluKernel(N, *T, P.Rows));
      continue;
    }
    if (N.getOp() == OpCode::Attention) {
      // Attention absorbs no epilogue: unfused kernels only.
      Add(keyOf(C.Name, false), generateAttentionKernel(N, C));
      continue;
    }
    std::optional<GemmTileConfig> T = gemmTileOf(C);
    if (!T)
      continue;
    Add(keyOf(C.Name, false), generateGemmKernel(N, *T, false, P.Rows));
    if (HasEpi)
      Add(keyOf(C.Name, true), generateGemmKernel(N, *T, true, P.Rows));
  }
  if (HasEpi)
    Add("epilogue", generateEpilogueKernel(N, P.Rows));
  llvm::TimeTraceScope Scope(
      "cuda.compile", [&] { return std::to_string(Jobs.size()) + " kernels"; });
  std::vector<llvm::Expected<std::string>> Cubins =
      compileAll(Jobs, G->Info.Major * 10 + G->Info.Minor);
  for (size_t I = 0; I < Jobs.size(); ++I) {
    LoadedKernel &L = P.Kernels[Keys[I]];
    if (!Cubins[I]) {
      L.Error = "failed to compile: " + llvm::toString(Cubins[I].takeError());
      continue;
    }
    if (CUresult R = G->D->cuModuleLoadData(&L.Mod, Cubins[I]->data())) {
      L.Error = "cannot load the module: " + G->D->errorString(R);
      continue;
    }
    if (CUresult R =
            G->D->cuModuleGetFunction(&L.Fn, L.Mod, L.K.Name.c_str())) {
      L.Error = "no entry point: " + G->D->errorString(R);
      continue;
    }
    if (L.K.SharedBytes > 48 * 1024) {
      if (int(L.K.SharedBytes) > G->Info.MaxSharedOptin) {
        L.Error = "needs " + std::to_string(L.K.SharedBytes) +
                  " bytes of shared memory; the device allows " +
                  std::to_string(G->Info.MaxSharedOptin);
        continue;
      }
      if (CUresult R = G->D->cuFuncSetAttribute(
              L.Fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
              int(L.K.SharedBytes)))
        L.Error =
            "cannot raise the shared memory limit: " + G->D->errorString(R);
    }
  }
}

/// The fp64 reference of check row Index of P (the node alone, and with
/// its epilogue fused and as its own kernel); an error message, or empty.
/// Rows are independent: prepare() computes them in parallel.
static std::string referenceRow(const MultiTemplateBufferNode &N, Prepared &P,
                                llvm::ArrayRef<const Node *> Chain,
                                size_t Index) {
  int64_t R = P.CheckRows[Index];
  int64_t Rows = P.Rows;
  // Read-only from here: rows run in parallel.
  const ValueData &Host = P.Host;
  // Computed on the GPU already, or else here.
  std::vector<double> Row = P.RefMain[Index];
  if (!Row.empty()) {
  } else if (Row.assign(P.N, 0.0); N.getOp() == OpCode::MatMul) {
    const TensorType &BT = N.getOperand(1)->getType();
    int64_t M1 =
        N.getOperand(0)->getType().Shape[N.getOperand(0)->getType().rank() - 2];
    const double *A = &Host.at(N.getOperand(0))[R * P.K];
    const double *B =
        &Host.at(N.getOperand(1))[BT.rank() > 2 ? (R / M1) * P.K * P.N : 0];
    for (int64_t Kk = 0; Kk < P.K; ++Kk)
      for (int64_t C = 0; C < P.N; ++C)
        Row[C] += A[Kk] * B[Kk * P.N + C];
  } else if (N.getOp() == OpCode::SwiGlu) {
    const double *A = &Host.at(N.getOperand(0))[R * P.K];
    const double *Wg = Host.at(N.getOperand(1)).data();
    const double *Wu = Host.at(N.getOperand(2)).data();
    std::vector<double> U(P.N, 0.0);
    for (int64_t Kk = 0; Kk < P.K; ++Kk)
      for (int64_t C = 0; C < P.N; ++C) {
        Row[C] += A[Kk] * Wg[Kk * P.N + C];
        U[C] += A[Kk] * Wu[Kk * P.N + C];
      }
    for (int64_t C = 0; C < P.N; ++C)
      Row[C] = Row[C] / (1 + std::exp(-Row[C])) * U[C];
  } else if (std::optional<AttentionShape> S = attentionShapeOf(N)) {
    attentionReferenceRow(*S, Host.at(N.getOperand(0)).data(),
                          Host.at(N.getOperand(1)).data(),
                          Host.at(N.getOperand(2)).data(), R, Row.data());
  }
  P.RefMain[Index] = Row;
  // Applies the chain to X, keeping this row of each value the epilogue
  // also writes in its slot of Writes (sized by prepare()).
  auto ApplyChain =
      [&](std::vector<double> &X,
          std::map<const Value *, std::vector<std::vector<double>>> &Writes)
      -> llvm::Error {
    const Value *Prev = N.getResult();
    for (const Node *C : Chain) {
      if (llvm::Error E = interpretRowChain(C, Prev, R, Rows, X, P.Host))
        return E;
      Prev = C->getResult();
      auto It = Writes.find(Prev);
      if (It != Writes.end())
        It->second[Index] = X;
    }
    return llvm::Error::success();
  };
  if (!Chain.empty()) {
    if (llvm::Error E = ApplyChain(Row, P.RefWritesFused))
      return llvm::toString(std::move(E));
    P.RefFused[Index] = Row;
    std::vector<double> In(Host.at(N.getResult()).begin() + R * P.N,
                           Host.at(N.getResult()).begin() + (R + 1) * P.N);
    if (llvm::Error E = ApplyChain(In, P.RefWritesEpi))
      return llvm::toString(std::move(E));
    P.RefEpi[Index] = In;
  }
  return std::string();
}

Prepared &CudaBenchmarker::prepare(const MultiTemplateBufferNode &N,
                                   const Workload &W) {
  int64_t OwnRows = rowsOf(N.getType());
  int64_t Rows = W.K == Workload::Kind::Gemm || W.K == Workload::Kind::SwiGlu
                     ? W.Gemm.M * W.Gemm.Batch
                     : OwnRows;
  auto &Slot = Cache[{&N, Rows}];
  if (Slot)
    return *Slot;
  Slot = std::make_unique<Prepared>();
  Prepared &P = *Slot;
  llvm::TimeTraceScope Scope("cuda.prepare", "%" + N.getName());
  P.Rows = Rows;
  P.N = N.getType().innerDim();
  P.K = N.getNumOperands() ? N.getOperand(0)->getType().innerDim() : 0;

  // Values the kernels read: operands, the epilogue's other inputs, and
  // N's own result (the epilogue kernel's input).
  std::vector<const Value *> Values;
  for (const Operand &O : N.getOperands())
    Values.push_back(O.V);
  Values.push_back(N.getResult());
  for (const Operand &E : N.getEpilogue())
    for (const Operand &O : E.V->getDef()->getOperands())
      if (llvm::find(Values, O.V) == Values.end() &&
          llvm::none_of(N.getEpilogue(),
                        [&](const Operand &X) { return X.V == O.V; }))
        Values.push_back(O.V);
  auto NumAt = [&](const Value *V) {
    const TensorType &T = V->getType();
    if (rowsOf(T) == OwnRows && T.rank() >= 2)
      return Rows * T.innerDim();
    return T.numElements();
  };
  std::mt19937_64 Rng(Opts.Seed * 1000003 + 17);
  int64_t Footprint = 0;
  for (const Value *V : Values)
    Footprint += NumAt(V) * dtypeBytes(V->getType().Dtype);
  Footprint += 2 * Rows * P.N * dtypeBytes(N.getType().Dtype);
  P.Copies = int(std::min<int64_t>(
      8, std::max<int64_t>(1, (3 * int64_t(G->Info.L2Bytes) + Footprint - 1) /
                                  std::max<int64_t>(1, Footprint))));
  std::optional<llvm::TimeTraceScope> Phase;
  Phase.emplace("cuda.prepare.inputs");
  // A GEMM's operands (weights of up to hundreds of millions of elements)
  // are filled on the GPU and its reference rows computed there; the rest
  // (activation-sized: the epilogue's inputs, the node's own result) are
  // drawn on the host, where the epilogue's reference reads them.
  bool Gemm = N.getOp() == OpCode::MatMul || N.getOp() == OpCode::SwiGlu;
  // The GPU reference reads every operand as one element type.
  bool SameType = llvm::all_of(N.getOperands(), [&](const Operand &O) {
    return O.V->getType().Dtype == N.getOperand(0)->getType().Dtype;
  });
  BenchSupport *Support = Gemm && SameType ? support(*G) : nullptr;
  std::vector<const Node *> Chain;
  for (const Operand &E : N.getEpilogue())
    Chain.push_back(E.V->getDef());
  auto Reads = [](const Node *X, const Value *V) {
    return llvm::any_of(X->getOperands(),
                        [&](const Operand &O) { return O.V == V; });
  };
  auto OnGpu = [&](const Value *V) {
    return Support && Reads(&N, V) &&
           llvm::none_of(Chain, [&](const Node *X) { return Reads(X, V); });
  };
  for (auto [Stream, V] : llvm::enumerate(Values)) {
    DType T = V->getType().Dtype;
    int64_t Count = NumAt(V);
    size_t Bytes = size_t(Count) * dtypeBytes(T);
    bool Device = OnGpu(V) && T != DType::I32 && T != DType::I64;
    std::vector<double> H;
    std::string HostBytes;
    if (!Device) {
      H = randomValues(Count, Opts.Seed, Stream, T);
      HostBytes = toDeviceBytes(H, T);
    }
    for (int C = 0; C < P.Copies; ++C) {
      DevBuf B;
      B.Bytes = Bytes;
      bool Failed = G->D->cuMemAlloc(&B.P, std::max<size_t>(16, B.Bytes));
      if (!Failed && Device) {
        if (llvm::Error E =
                Support->fill(B.P, Count, T, Opts.Seed, Stream, G->Stream)) {
          P.Error = llvm::toString(std::move(E));
          return P;
        }
      } else if (!Failed) {
        Failed = G->D->cuMemcpyHtoD(B.P, HostBytes.data(), B.Bytes);
      }
      if (Failed) {
        P.Error = "cannot allocate or fill " + std::to_string(B.Bytes) +
                  " bytes for '%" + V->getName() + "'";
        return P;
      }
      P.Dev[V].push_back(B);
    }
    if (!Device)
      P.Host[V] = std::move(H);
  }
  if (Support && G->D->cuStreamSynchronize(G->Stream)) {
    P.Error = "filling the inputs failed";
    return P;
  }
  const Value *Last =
      N.getEpilogue().empty() ? N.getResult() : N.getEpilogue().back().V;
  for (int C = 0; C < P.Copies; ++C)
    for (auto [Buf, V] :
         {std::make_pair(&P.OutMain[C], (const Value *)N.getResult()),
          std::make_pair(&P.OutFused[C], Last),
          std::make_pair(&P.OutEpi[C], Last)}) {
      Buf->Bytes = Rows * P.N * dtypeBytes(V->getType().Dtype);
      if (G->D->cuMemAlloc(&Buf->P, std::max<size_t>(16, Buf->Bytes))) {
        P.Error = "cannot allocate the output";
        return P;
      }
    }

  Phase.emplace("cuda.prepare.reference");
  // Reference rows: all of a small output, else the first, the last and
  // 14 random ones.
  if (Rows <= 64) {
    for (int64_t R = 0; R < Rows; ++R)
      P.CheckRows.push_back(R);
  } else {
    P.CheckRows = {0, Rows - 1};
    std::uniform_int_distribution<int64_t> Pick(1, Rows - 2);
    while (P.CheckRows.size() < 16)
      P.CheckRows.push_back(Pick(Rng));
  }
  // A kernel writing the epilogue's `writes` needs a buffer for each,
  // allocated before the first check poisons it.
  for (const Operand &Wr : N.getEpilogueWrites()) {
    std::vector<DevBuf> &Bufs = P.Scratch[Wr.V];
    Bufs.resize(P.Copies);
    for (DevBuf &B : Bufs) {
      B.Bytes =
          Rows * Wr.V->getType().innerDim() * dtypeBytes(Wr.V->getType().Dtype);
      if (G->D->cuMemAlloc(&B.P, std::max<size_t>(16, B.Bytes))) {
        P.Error = "cannot allocate the output '%" + Wr.V->getName() + "'";
        return P;
      }
    }
  }
  // One row per task: a check row of a 4096-wide GEMM is 16M multiply-adds
  // in fp64, and a decode GEMM checks every one of its rows.
  size_t NumRows = P.CheckRows.size();
  P.RefMain.assign(NumRows, {});
  if (!Chain.empty()) {
    P.RefFused.assign(NumRows, {});
    P.RefEpi.assign(NumRows, {});
    // Sized here: the rows fill their own slots in parallel.
    for (const Operand &Wr : N.getEpilogueWrites()) {
      P.RefWritesFused[Wr.V].assign(NumRows, {});
      P.RefWritesEpi[Wr.V].assign(NumRows, {});
    }
  }
  if (Support) {
    // The GEMM's own rows on the GPU, from its device inputs (copy 0).
    const Value *A = N.getOperand(0);
    const TensorType &AT = A->getType();
    int64_t M1 = AT.rank() >= 2 ? AT.Shape[AT.rank() - 2] : 1;
    auto RowsOf = [&](const Value *B) {
      return Support->gemmRows(P.Dev[A][0].P, P.Dev[B][0].P, AT.Dtype,
                               P.CheckRows, P.K, P.N, M1,
                               B->getType().rank() > 2, G->Stream);
    };
    if (N.getOp() == OpCode::MatMul) {
      auto R = RowsOf(N.getOperand(1));
      if (!R) {
        P.Error = llvm::toString(R.takeError());
        return P;
      }
      P.RefMain = std::move(*R);
    } else if (N.getOp() == OpCode::SwiGlu) {
      auto Gate = RowsOf(N.getOperand(1));
      auto Up = Gate ? RowsOf(N.getOperand(2)) : Gate.takeError();
      if (!Up) {
        P.Error = llvm::toString(Up.takeError());
        return P;
      }
      for (size_t I = 0; I < NumRows; ++I) {
        std::vector<double> &Gr = (*Gate)[I];
        for (int64_t C = 0; C < P.N; ++C)
          Gr[C] = Gr[C] / (1 + std::exp(-Gr[C])) * (*Up)[I][C];
      }
      P.RefMain = std::move(*Gate);
    }
  }
  std::vector<std::string> RowErrors(NumRows);
  parallelChunks(
      int64_t(NumRows),
      [&](int64_t Begin, int64_t End) {
        for (int64_t I = Begin; I < End; ++I)
          RowErrors[I] = referenceRow(N, P, Chain, size_t(I));
      },
      /*MinChunk=*/1);
  for (const std::string &E : RowErrors)
    if (!E.empty()) {
      P.Error = E;
      return P;
    }
  Phase.reset();
  if (N.getOp() == OpCode::MatMul || N.getOp() == OpCode::SwiGlu ||
      N.getOp() == OpCode::Attention)
    precompile(N, P);
  return P;
}

CUresult CudaBenchmarker::launch(LoadedKernel &L, Prepared &P,
                                 const DevBuf *Out, int Copy) {
  std::vector<CUdeviceptr> Ptrs;
  for (const Value *V : L.K.Inputs)
    Ptrs.push_back(P.Dev[V][Copy].P);
  std::vector<void *> Args;
  if (!L.K.TensorMaps.empty()) {
    auto [It, New] = L.Maps.try_emplace(Copy);
    if (New)
      if (CUresult R = encodeTensorMaps(*G->D, L.K, Ptrs, It->second)) {
        L.Maps.erase(It);
        return R;
      }
    for (CUtensorMap &Map : It->second)
      Args.push_back(&Map);
  }
  // The measured output is the kernel's last; any before it (an epilogue's
  // `writes`) go to scratch buffers of their own.
  for (size_t I = 0; I + 1 < L.K.Outputs.size(); ++I) {
    const Value *V = L.K.Outputs[I];
    std::vector<DevBuf> &Bufs = P.Scratch[V];
    if (Bufs.empty()) {
      Bufs.resize(P.Copies);
      for (DevBuf &B : Bufs) {
        B.Bytes =
            P.Rows * V->getType().innerDim() * dtypeBytes(V->getType().Dtype);
        if (CUresult R =
                G->D->cuMemAlloc(&B.P, std::max<size_t>(16, B.Bytes))) {
          for (DevBuf &F : Bufs)
            if (F.P)
              G->D->cuMemFree(F.P);
          P.Scratch.erase(V);
          return R;
        }
      }
    }
    Ptrs.push_back(Bufs[Copy].P);
  }
  Ptrs.push_back(Out[Copy].P);
  if (L.K.WorkspaceBytes) {
    // measure() allocated and zeroed it; 1 is CUDA_ERROR_INVALID_VALUE.
    if (P.Workspace.Bytes < L.K.WorkspaceBytes)
      return 1;
    Ptrs.push_back(P.Workspace.P);
  }
  for (CUdeviceptr &X : Ptrs)
    Args.push_back(&X);
  return G->D->cuLaunchKernel(L.Fn, L.K.GridX, L.K.GridY, L.K.GridZ, L.K.BlockX,
                              1, 1, L.K.SharedBytes, G->Stream, Args.data(),
                              nullptr);
}

Measurement CudaBenchmarker::run(
    const std::function<CUresult(int)> &Launch, Prepared &P, const DevBuf *Out,
    DType OutType, const std::vector<std::vector<double>> &Ref, double *Best,
    const KernelSource *K,
    const std::map<const Value *, std::vector<std::vector<double>>> *Extra) {
  const DriverApi &D = *G->D;
  auto Fail = [&](const char *What, CUresult R) {
    return failed(ChoiceStatus::Failed,
                  std::string(What) + ": " + D.errorString(R));
  };
  // The kernel's other outputs (an epilogue's `writes`), each with its
  // buffer of copy 0 and its reference rows.
  std::vector<std::tuple<const Value *, const DevBuf *,
                         const std::vector<std::vector<double>> *>>
      Others;
  if (K && Extra)
    for (size_t I = 0; I + 1 < K->Outputs.size(); ++I) {
      const Value *V = K->Outputs[I];
      auto B = P.Scratch.find(V);
      auto R = Extra->find(V);
      if (B == P.Scratch.end() || B->second.empty() || R == Extra->end())
        return failed(ChoiceStatus::Failed,
                      "no reference for the output '%" + V->getName() + "'");
      Others.emplace_back(V, &B->second[0], &R->second);
    }
  // Correctness: poison the outputs, run once, compare sampled rows.
  std::optional<llvm::TimeTraceScope> Phase;
  Phase.emplace("cuda.check");
  if (CUresult R = D.cuMemsetD8Async(Out[0].P, 0xff, Out[0].Bytes, G->Stream))
    return Fail("cannot poison the output", R);
  for (auto &[V, B, Rows] : Others)
    if (CUresult R = D.cuMemsetD8Async(B->P, 0xff, B->Bytes, G->Stream))
      return Fail("cannot poison an output", R);
  if (CUresult R = Launch(0))
    return Fail("launch failed", R);
  if (CUresult R = D.cuStreamSynchronize(G->Stream))
    return Fail("kernel failed", R);
  // Only the checked rows come back: the whole of a 4096x4096 output took
  // a tenth of a second to copy and convert, for 16 rows.
  size_t RowBytes = size_t(P.N) * dtypeBytes(OutType);
  std::string Bytes(P.CheckRows.size() * RowBytes, '\0');
  std::vector<int64_t> Packed;
  for (int64_t Row : P.CheckRows) {
    if (CUresult R =
            D.cuMemcpyDtoH(&Bytes[Packed.size() * RowBytes],
                           Out[0].P + CUdeviceptr(Row) * RowBytes, RowBytes))
      return Fail("cannot read the output", R);
    Packed.push_back(int64_t(Packed.size()));
  }
  double Rel = relError(toHostValues(Bytes, OutType), P.N, Packed, Ref);
  if (!(Rel <= tolerance(OutType)))
    return failed(ChoiceStatus::WrongResult,
                  "output differs from the fp64 reference: relative error " +
                      llvm::formatv("{0:e2}", Rel).str() + " > " +
                      llvm::formatv("{0:e0}", tolerance(OutType)).str());
  for (auto &[V, B, Rows] : Others) {
    DType T = V->getType().Dtype;
    size_t WBytes = size_t(V->getType().innerDim()) * dtypeBytes(T);
    std::string Other(P.CheckRows.size() * WBytes, '\0');
    for (size_t I = 0; I < P.CheckRows.size(); ++I)
      if (CUresult R = D.cuMemcpyDtoH(
              &Other[I * WBytes], B->P + CUdeviceptr(P.CheckRows[I]) * WBytes,
              WBytes))
        return Fail("cannot read an output", R);
    double RelW = relError(toHostValues(Other, T), V->getType().innerDim(),
                           Packed, *Rows);
    if (!(RelW <= tolerance(T)))
      return failed(ChoiceStatus::WrongResult,
                    "output '%" + V->getName() +
                        "' differs from the fp64 reference: relative error " +
                        llvm::formatv("{0:e2}", RelW).str() + " > " +
                        llvm::formatv("{0:e0}", tolerance(T)).str());
  }
  // Warm-up, then an estimate that sizes the samples.
  Phase.emplace("cuda.time");
  for (unsigned I = 0; I < std::max(1u, Opts.WarmupRuns); ++I)
    if (CUresult R = Launch(int(I % P.Copies)))
      return Fail("launch failed", R);
  D.cuEventRecord(G->E0, G->Stream);
  if (CUresult R = Launch(0))
    return Fail("launch failed", R);
  D.cuEventRecord(G->E1, G->Stream);
  if (CUresult R = D.cuEventSynchronize(G->E1))
    return Fail("kernel failed", R);
  float Ms = 0;
  D.cuEventElapsedTime(&Ms, G->E0, G->E1);
  double EstUs = std::max(1.0, double(Ms) * 1000);
  int PerSample = int(std::min(1000.0, std::max(2.0, std::ceil(500 / EstUs))));
  double Budget = EstUs * PerSample * Opts.BenchRuns / 1000;
  if (Budget > double(Opts.ChoiceTimeout.count()))
    return failed(
        ChoiceStatus::Timeout,
        "would run " + std::to_string(int(Budget)) + " ms, past the " +
            std::to_string(Opts.ChoiceTimeout.count()) + " ms choice timeout");
  std::vector<double> Samples;
  for (unsigned S = 0; S < std::max(1u, Opts.BenchRuns); ++S) {
    if (G->Flush)
      D.cuMemsetD8Async(G->Flush, S & 0xff, G->FlushBytes, G->Stream);
    D.cuEventRecord(G->E0, G->Stream);
    for (int I = 0; I < PerSample; ++I)
      if (CUresult R = Launch(int((S * PerSample + I) % P.Copies)))
        return Fail("launch failed", R);
    D.cuEventRecord(G->E1, G->Stream);
    if (CUresult R = D.cuEventSynchronize(G->E1))
      return Fail("kernel failed", R);
    D.cuEventElapsedTime(&Ms, G->E0, G->E1);
    Samples.push_back(double(Ms) * 1000 / PerSample);
    // Triton's and Inductor's habit: a choice whose first samples are all
    // far slower than the best so far cannot win; its median so far says
    // so without the remaining samples.
    if (Best && Samples.size() == EarlyStopSamples &&
        Samples.size() < Opts.BenchRuns &&
        *llvm::min_element(Samples) > EarlyStopFactor * *Best)
      break;
  }
  std::nth_element(Samples.begin(), Samples.begin() + Samples.size() / 2,
                   Samples.end());
  Measurement M;
  M.Us = Samples[Samples.size() / 2];
  if (Best)
    *Best = std::min(*Best, M.Us);
  return M;
}

Measurement CudaBenchmarker::measure(const MultiTemplateBufferNode &N,
                                     const Workload &W, const Choice &C,
                                     bool Fused) {
  if (W.K == Workload::Kind::Collective && W.Ranks > 1) {
    // Every rank must take part, even one that refuses (an injected fault):
    // the peers then fail the choice too instead of waiting for it.
    if (Comm && Comm->size() > W.Ranks)
      return failed(ChoiceStatus::Failed,
                    "the cuda backend times collectives over every rank "
                    "only; a " +
                        std::to_string(W.Ranks) + "-rank process group of " +
                        std::to_string(Comm->size()) +
                        " ranks is not implemented yet");
    if (!Comm || Comm->size() != W.Ranks)
      return failed(ChoiceStatus::Failed,
                    "a " + std::to_string(W.Ranks) +
                        "-rank collective needs that many ranks, one GPU "
                        "each (run with --ranks=" +
                        std::to_string(W.Ranks) + ")");
    std::string Fault;
    if (Opts.Faults.choiceFault(Rank, N.getName(), C.Name))
      Fault = "injected fault";
    if (!Coll)
      Coll = createCollectiveRank(Opts, *Comm);
    return Coll->measure(N, W, C, Fused, Fault);
  }
  if (const Fault *F = Opts.Faults.choiceFault(Rank, N.getName(), C.Name))
    return failed(F->K == Fault::Kind::WrongResult ? ChoiceStatus::WrongResult
                                                   : ChoiceStatus::Failed,
                  "injected fault");
  if (W.K == Workload::Kind::Collective) {
    if (W.Ranks > 1)
      return failed(ChoiceStatus::Failed,
                    "the cuda backend needs one rank per GPU for a " +
                        std::to_string(W.Ranks) +
                        "-rank collective (not implemented yet)");
    if (Fused)
      return failed(ChoiceStatus::Failed,
                    "a one-rank collective is a copy; its epilogue is "
                    "measured as its own kernel");
  }
  if (W.K == Workload::Kind::Custom)
    return failed(ChoiceStatus::Failed,
                  "the cuda backend has no kernel for custom op '" +
                      N.getOpName().str() + "'");
  if (std::string Why = openGpu(); !Why.empty())
    return failed(ChoiceStatus::Failed, Why);
  std::lock_guard<std::mutex> Lock(G->Mu);
  if (llvm::Error E = makeCurrent(G->Info))
    return failed(ChoiceStatus::Failed, llvm::toString(std::move(E)));
  if (W.K == Workload::Kind::Collective) {
    // One rank: the collective is a device-to-device copy.
    Prepared &P = prepare(N, W);
    if (!P.Error.empty())
      return failed(ChoiceStatus::Failed, P.Error);
    const Value *In = N.getOperand(0);
    return run(
        [&](int Copy) {
          return G->D->cuMemcpyDtoDAsync(P.OutMain[Copy].P, P.Dev[In][Copy].P,
                                         P.OutMain[Copy].Bytes, G->Stream);
        },
        P, P.OutMain, N.getType().Dtype,
        [&] {
          std::vector<std::vector<double>> Ref;
          for (int64_t R : P.CheckRows)
            Ref.emplace_back(P.Host[In].begin() + R * P.N,
                             P.Host[In].begin() + (R + 1) * P.N);
          return Ref;
        }());
  }
  Prepared &P = prepare(N, W);
  if (!P.Error.empty())
    return failed(ChoiceStatus::Failed, P.Error);
  DType OutType =
      Fused ? N.getEpilogue().back().V->getType().Dtype : N.getType().Dtype;
  const DevBuf *Out = Fused ? P.OutFused : P.OutMain;
  const auto &Ref = Fused ? P.RefFused : P.RefMain;
  if (C.isExtern()) {
    if (Fused)
      return failed(ChoiceStatus::Failed, "'" + C.Name + "' cannot fuse");
    if (C.Name != "extern.cublas")
      return failed(ChoiceStatus::Failed, "unknown extern choice");
    if (!G->B)
      return failed(ChoiceStatus::Failed, G->BlasError);
    if (N.getOperand(1)->getType().rank() > 2)
      return failed(ChoiceStatus::Failed,
                    "batched weights are not passed to cuBLAS yet");
    int Type = N.getType().Dtype == DType::BF16  ? CUDA_R_16BF
               : N.getType().Dtype == DType::F16 ? CUDA_R_16F
                                                 : CUDA_R_32F;
    const Value *A = N.getOperand(0), *B = N.getOperand(1);
    float One = 1, Zero = 0;
    // Row-major C = A B is column-major C^T = B^T A^T.
    return run(
        [&](int Copy) -> CUresult {
          int S = G->B->cublasGemmEx(
              G->Blas, CUBLAS_OP_N, CUBLAS_OP_N, int(P.N), int(P.Rows),
              int(P.K), &One, reinterpret_cast<void *>(P.Dev[B][Copy].P), Type,
              int(P.N), reinterpret_cast<void *>(P.Dev[A][Copy].P), Type,
              int(P.K), &Zero, reinterpret_cast<void *>(P.OutMain[Copy].P),
              Type, int(P.N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
          return S ? 999 : CUDA_SUCCESS;
        },
        P, P.OutMain, OutType, Ref, &P.BestUs[0]);
  }
  auto It = P.Kernels.find(keyOf(C.Name, Fused));
  if (It == P.Kernels.end())
    return failed(ChoiceStatus::Failed,
                  "no kernel for '" + C.Name + "' on the cuda backend");
  LoadedKernel &L = It->second;
  if (!L.Error.empty())
    return failed(ChoiceStatus::Failed, L.Error);
  if (L.K.WorkspaceBytes) {
    // Zero-filled before every choice: a split-KV kernel's tile counters
    // must start at zero, whatever ran in the workspace before.
    if (P.Workspace.Bytes < L.K.WorkspaceBytes) {
      if (P.Workspace.P)
        G->D->cuMemFree(P.Workspace.P);
      P.Workspace = DevBuf();
      if (CUresult R = G->D->cuMemAlloc(&P.Workspace.P, L.K.WorkspaceBytes))
        return failed(ChoiceStatus::Failed,
                      "cannot allocate a workspace of " +
                          std::to_string(L.K.WorkspaceBytes) +
                          " bytes: " + G->D->errorString(R));
      P.Workspace.Bytes = L.K.WorkspaceBytes;
    }
    if (CUresult R = G->D->cuMemsetD8Async(P.Workspace.P, 0, P.Workspace.Bytes,
                                           G->Stream))
      return failed(ChoiceStatus::Failed,
                    "cannot clear the workspace: " + G->D->errorString(R));
  }
  return run([&](int Copy) { return launch(L, P, Out, Copy); }, P, Out, OutType,
             Ref, &P.BestUs[Fused], &L.K, &P.RefWritesFused);
}

Measurement CudaBenchmarker::measureEpilogue(const MultiTemplateBufferNode &N,
                                             const Workload &W) {
  if (N.getEpilogue().empty())
    return Measurement();
  if (std::string Why = openGpu(); !Why.empty())
    return failed(ChoiceStatus::Failed, Why);
  std::lock_guard<std::mutex> Lock(G->Mu);
  if (llvm::Error E = makeCurrent(G->Info))
    return failed(ChoiceStatus::Failed, llvm::toString(std::move(E)));
  Prepared &P = prepare(N, W);
  if (!P.Error.empty())
    return failed(ChoiceStatus::Failed, P.Error);
  auto It = P.Kernels.find("epilogue");
  if (It == P.Kernels.end()) {
    // Not a matmul: compile the epilogue alone.
    LoadedKernel &L = P.Kernels["epilogue"];
    llvm::Expected<KernelSource> K = generateEpilogueKernel(N, P.Rows);
    if (!K) {
      L.Error = llvm::toString(K.takeError());
    } else {
      L.K = std::move(*K);
      auto C = compileAll({{L.K.Name, L.K.Source}},
                          G->Info.Major * 10 + G->Info.Minor);
      if (!C[0])
        L.Error = llvm::toString(C[0].takeError());
      else if (G->D->cuModuleLoadData(&L.Mod, C[0]->data()) ||
               G->D->cuModuleGetFunction(&L.Fn, L.Mod, L.K.Name.c_str()))
        L.Error = "cannot load the epilogue kernel";
    }
    It = P.Kernels.find("epilogue");
  }
  LoadedKernel &L = It->second;
  if (!L.Error.empty())
    return failed(ChoiceStatus::Failed, L.Error);
  return run([&](int Copy) { return launch(L, P, P.OutEpi, Copy); }, P,
             P.OutEpi, N.getEpilogue().back().V->getType().Dtype, P.RefEpi,
             nullptr, &L.K, &P.RefWritesEpi);
}

llvm::Expected<std::unique_ptr<Benchmarker>>
mtsched::createCudaBenchmarker(const AutotuneOptions &Opts, int Rank,
                               Communicator &Comm) {
  // Only the driver library is checked here (no CUDA context, no cuInit):
  // the GPU opens at the first measurement, so a fully cached run starts
  // in milliseconds. A machine with the driver but no usable GPU fails
  // every measurement with the reason instead.
  if (llvm::Expected<const DriverApi &> D = loadDriver(); !D)
    return err("the cuda backend cannot run here: " +
               llvm::toString(D.takeError()));
  return std::make_unique<CudaBenchmarker>(Opts, Rank, Comm);
}

llvm::Error mtsched::openCudaDevice(const AutotuneOptions &Opts) {
  llvm::Expected<Gpu &> G = gpu(Opts.GpuOrdinal);
  if (!G)
    return err("the cuda backend cannot run here: " +
               llvm::toString(G.takeError()));
  return llvm::Error::success();
}

BackendInfo mtsched::getCudaBackend() {
  BackendInfo B;
  B.Name = "cuda";
  B.Description = "NVRTC-compiled kernels timed with CUDA events on a GPU";
  // CudaBenchmarker does not override getVersion().
  B.Version = Benchmarker::getDefaultVersion().str();
  B.Create = createCudaBenchmarker;
  B.Probe = [](const AutotuneOptions &Opts) -> llvm::Error {
    // The driver library first (cheap), then the device itself.
    if (llvm::Expected<const DriverApi &> D = loadDriver(); !D)
      return err("the cuda backend cannot run here: " +
                 llvm::toString(D.takeError()));
    return openCudaDevice(Opts);
  };
  B.TriedByAuto = true;
  return B;
}

//===----------------------------------------------------------------------===//
// --run: the whole decided graph
//===----------------------------------------------------------------------===//

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
    if (CUresult R = D.cuEventSynchronize(Gp.E1))
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
    std::string Bytes = toDeviceBytes(Host[In.get()], In->getType().Dtype);
    if (CUresult R = D.cuMemcpyHtoD(Dev[In.get()], Bytes.data(), Bytes.size()))
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
    auto C = compileAll({{K.Name, K.Source, K.NeedsSm90a}}, Arch);
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
            D, K, llvm::ArrayRef(Ptrs).take_front(K.Inputs.size()), Maps))
      return err("cannot encode the tensor maps of '" + K.Name +
                 "': " + D.errorString(R));
    std::vector<void *> Args;
    for (CUtensorMap &Map : Maps)
      Args.push_back(&Map);
    for (CUdeviceptr &X : Ptrs)
      Args.push_back(&X);
    if (CUresult R =
            D.cuLaunchKernel(Fn, K.GridX, K.GridY, K.GridZ, K.BlockX, 1, 1,
                             K.SharedBytes, Gp.Stream, Args.data(), nullptr))
      return err("launch of '" + K.Name + "' failed: " + D.errorString(R));
    if (CUresult R = D.cuStreamSynchronize(Gp.Stream))
      return err("'" + K.Name + "' failed: " + D.errorString(R));
    auto State = std::make_shared<
        std::pair<std::vector<CUtensorMap>, std::vector<CUdeviceptr>>>(
        std::move(Maps), std::move(Ptrs));
    unsigned GX = K.GridX, GY = K.GridY, GZ = K.GridZ, BX = K.BlockX,
             Shared = K.SharedBytes;
    Replay.push_back([&D, &Gp, Fn, State, GX, GY, GZ, BX, Shared] {
      std::vector<void *> A;
      for (CUtensorMap &Map : State->first)
        A.push_back(&Map);
      for (CUdeviceptr &X : State->second)
        A.push_back(&X);
      return D.cuLaunchKernel(Fn, GX, GY, GZ, BX, 1, 1, Shared, Gp.Stream,
                              A.data(), nullptr);
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
        if (llvm::Error E = Alloc(M->getResult()))
          return E;
        D.cuMemcpyDtoDAsync(Dev[M->getResult()], Dev[M->getOperand(0)],
                            M->getType().numBytes(), Gp.Stream);
        D.cuStreamSynchronize(Gp.Stream);
        Replay.push_back([&D, &Gp, Dst = Dev[M->getResult()],
                          Src = Dev[M->getOperand(0)],
                          Bytes = size_t(M->getType().numBytes())] {
          return D.cuMemcpyDtoDAsync(Dst, Src, Bytes, Gp.Stream);
        });
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
      } else if (M->getDecision() == "extern.cublas" && Gp.B &&
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
        D.cuStreamSynchronize(Gp.Stream);
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
    if (isLayout(B->getOp())) {
      // reshape is a view of its operand's memory; the other layout ops
      // gather into their own buffer.
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
    const std::vector<double> &Ref = Host[V];
    double E2 = 0, R2 = 0;
    bool Finite = true;
    for (size_t I = 0; I < Out.size(); ++I) {
      Finite &= std::isfinite(Out[I]) || !std::isfinite(Ref[I]);
      E2 += (Out[I] - Ref[I]) * (Out[I] - Ref[I]);
      R2 += Ref[I] * Ref[I];
    }
    double Rel = R2 > 0 ? std::sqrt(E2 / R2) : std::sqrt(E2);
    bool Ok = Finite && Rel <= tolerance(V->getType().Dtype);
    AllOk &= Ok;
    OS << "run @" << G.getName() << ": output %" << V->getName() << " "
       << (Ok ? "matches" : "DIFFERS FROM")
       << " the fp64 reference (relative error " << llvm::formatv("{0:e2}", Rel)
       << ", tolerance "
       << llvm::formatv("{0:e0}", tolerance(V->getType().Dtype)) << ", "
       << Launched << " launches)\n";
  }
  if (!AllOk)
    return err("@" + G.getName() + ": an output differs from the reference");
  if (IO.TimeRuns > 0)
    timeReplay(G, Gp, Replay, IO.TimeRuns, OS);
  return llvm::Error::success();
}
