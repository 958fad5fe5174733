//===- CudaBenchPrepare.cpp - What a node's choices share ----------------===//
//
// The builder starts a node's kernels compiling (every kept choice's, at
// once, on the NVRTC pool) before anything is timed. The first measurement
// of a node (at its size or a size hint) prepares its seeded inputs
// (rotated copies), the fp64 reference of a sample of output rows, and
// loads its kernels, compiling there what was not built ahead.
//
//===----------------------------------------------------------------------===//
#include "CudaBenchmarkerImpl.h"
#include "mtsched/Backend/Cuda/AttentionCodegen.h"
#include "mtsched/Backend/Cuda/CudaApi.h"
#include "mtsched/Backend/Cuda/CudaBenchSupport.h"
#include "mtsched/Backend/Cuda/CudaCodegen.h"
#include "mtsched/Backend/Cuda/CudaCompiler.h"
#include "mtsched/Backend/Cuda/OpUnitKernels.h"
#include "mtsched/IR/OpUnit.h"
#include "mtsched/Reference/Interpreter.h"
#include "mtsched/Reference/Npy.h"
#include "mtsched/Reference/OpUnitReference.h"
#include "mtsched/Reference/RandomInputs.h"
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
#include <future>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <random>

using namespace mtsched;
using namespace mtsched::cuda;

void CudaSession::startCompile(const MultiTemplateBufferNode &N, Prepared &P,
                               const DeviceInfo &Info, const DriverApi &D,
                               llvm::function_ref<bool(size_t)> Want) {
  std::vector<std::string> Keys;
  std::vector<CompileJob> Jobs;
  auto Add = [&](const std::string &Key, llvm::Expected<KernelSource> K) {
    if (P.Kernels.count(Key)) {
      llvm::consumeError(K.takeError());
      return;
    }
    LoadedKernel &L = P.Kernels[Key];
    if (!K) {
      L.Error = "no kernel: " + llvm::toString(K.takeError());
      return;
    }
    L.K = std::move(*K);
    L.Error = unsupportedReason(L.K, Info, D);
    if (!L.Error.empty())
      return;
    Keys.push_back(Key);
    Jobs.push_back({L.K.Name, L.K.Source, L.K.NeedsSm90a});
  };
  bool HasEpi = !N.getEpilogue().empty();
  for (size_t I = 0; I < N.getChoices().size(); ++I) {
    const Choice &C = N.getChoices()[I];
    if (!Want(I) || P.Kernels.count(keyOf(C.Name, false)))
      continue;
    if (N.getOp() == OpCode::SwiGlu) {
      if (std::optional<GemmTileConfig> T = swigluTileOf(C))
        Add(keyOf(C.Name, false), generateSwiGluKernel(N, *T, P.Rows));
      continue;
    }
    if (hasOpUnitChoices(N.getOp())) {
      // An op unit absorbs no epilogue; its library choices have no kernel.
      if (!C.isExtern())
        Add(keyOf(C.Name, false),
            generateOpUnitChoiceKernel(N.getName() + "_" + C.Name, N, C.Name));
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
  if (HasEpi && !P.Kernels.count("epilogue"))
    Add("epilogue", generateEpilogueKernel(N, P.Rows));
  if (Jobs.empty())
    return;
  // One pool for every node, first come first served: kernels of the
  // nodes built ahead (build()) queue behind those of the node being
  // measured.
  if (!Compiler)
    Compiler = std::make_unique<llvm::DefaultThreadPool>(
        llvm::hardware_concurrency(compileThreads(compileOptionsOf(Opts))));
  PendingKernels &Batch = P.Pending.emplace_back();
  Batch.Keys = std::move(Keys);
  Batch.Cubins.resize(Jobs.size());
  int Arch = Info.Major * 10 + Info.Minor;
  for (size_t I : longestFirst(Jobs))
    Batch.Cubins[I] = Compiler->async([this, Arch, J = std::move(Jobs[I])] {
      return compileOne(J, Arch, compileOptionsOf(Opts), Stats);
    });
}

void CudaSession::loadCompiled(Prepared &P) {
  for (PendingKernels &Batch : P.Pending) {
    {
      // The time spent waiting for NVRTC (all of it when the compile did
      // not start ahead of the node's preparation).
      llvm::TimeTraceScope Scope("cuda.compile", [&] {
        return std::to_string(Batch.Keys.size()) + " kernels";
      });
      auto T0 = std::chrono::steady_clock::now();
      for (const std::shared_future<CompiledKernel> &C : Batch.Cubins)
        C.wait();
      Stats.CompileMs += std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now() - T0)
                             .count();
    }
    for (size_t I = 0; I < Batch.Keys.size(); ++I) {
      LoadedKernel &L = P.Kernels[Batch.Keys[I]];
      const CompiledKernel &C = Batch.Cubins[I].get();
      if (!C.Error.empty()) {
        L.Error = "failed to compile: " + C.Error;
        continue;
      }
      if (CUresult R = G->D->cuModuleLoadData(&L.Mod, C.Cubin.data())) {
        L.Error = "cannot load the module: " + G->D->errorString(R);
        continue;
      }
      if (CUresult R =
              G->D->cuModuleGetFunction(&L.Fn, L.Mod, L.K.Name.c_str())) {
        L.Error = "no entry point: " + G->D->errorString(R);
        continue;
      }
      // The opt-in is asked for every kernel with dynamic shared memory,
      // not only above 48 KB: a kernel's static shared memory counts
      // against the same 48 KB, so dynamic memory just under it plus a
      // static flag fails to launch without it (an attn_dec tile did).
      if (L.K.SharedBytes > 0) {
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
  P.Pending.clear();
}

void CudaSession::compileChoices(const MultiTemplateBufferNode &N, Prepared &P,
                                 llvm::function_ref<bool(size_t)> Want) {
  startCompile(N, P, G->Info, *G->D, Want);
  loadCompiled(P);
}

/// Whether a node of N's op has kernels of its own per choice (compiled
/// with its preparation).
static bool hasChoiceKernels(const MultiTemplateBufferNode &N) {
  return N.getOp() == OpCode::MatMul || N.getOp() == OpCode::SwiGlu ||
         N.getOp() == OpCode::Attention || hasOpUnitChoices(N.getOp());
}

Prepared &CudaSession::slot(const MultiTemplateBufferNode &N,
                            const Workload &W) {
  int64_t Rows = W.K == Workload::Kind::Gemm || W.K == Workload::Kind::SwiGlu
                     ? W.Gemm.M * W.Gemm.Batch
                     : rowsOf(N.getType());
  auto &Slot = Cache[{&N, Rows}];
  if (!Slot) {
    Slot = std::make_unique<Prepared>();
    Slot->Rows = Rows;
    Slot->N = N.getType().innerDim();
    Slot->K = N.getNumOperands() ? N.getOperand(0)->getType().innerDim() : 0;
  }
  return *Slot;
}

std::string CudaArtifact::wait() const {
  for (const std::shared_future<CompiledKernel> &C : NodeCubins)
    C.wait();
  std::string Error;
  for (const std::shared_future<CompiledKernel> &C : Cubins)
    if (const CompiledKernel &K = C.get(); !K.Error.empty() && Error.empty())
      Error = "failed to compile: " + K.Error;
  return Error;
}

std::vector<BuiltChoices> CudaSession::build(llvm::ArrayRef<BuildInput> Batch) {
  std::vector<BuiltChoices> Out;
  for (const BuildInput &In : Batch)
    Out.push_back(buildNode(In));
  return Out;
}

BuiltChoices CudaSession::buildNode(const BuildInput &In) {
  const MultiTemplateBufferNode &N = *In.N;
  BuiltChoices Out(N.getChoices().size());
  if (In.W.K == Workload::Kind::Collective) {
    // Every rank builds a collective over every rank at the same point:
    // NCCL's communicator opens on its own thread while the runner times
    // the rest. One over fewer ranks is not timed (measure() says why).
    if (In.W.Ranks > 1 && Comm && Comm->size() == In.W.Ranks) {
      if (!Coll)
        Coll = createCollectiveRank(Opts, *Comm, Stats);
      Coll->startSetUp();
    }
    return Out;
  }
  if (In.W.K == Workload::Kind::Custom || !hasChoiceKernels(N))
    return Out;
  auto Kept = [&](size_t I) { return I >= In.Kept.size() || In.Kept[I]; };
  compileAhead(N, In.W, Kept);
  Prepared &P = slot(N, In.W);
  // What is still compiling, by kernel.
  std::map<std::string, std::shared_future<CompiledKernel>> Compiling;
  std::vector<std::shared_future<CompiledKernel>> All;
  for (const PendingKernels &B : P.Pending)
    for (size_t I = 0; I < B.Keys.size(); ++I) {
      Compiling[B.Keys[I]] = B.Cubins[I];
      All.push_back(B.Cubins[I]);
    }
  for (size_t I = 0; I < N.getChoices().size(); ++I) {
    if (!Kept(I))
      continue;
    const std::string &Name = N.getChoices()[I].Name;
    auto A = std::make_shared<CudaArtifact>();
    A->NodeCubins = All;
    for (bool Fused : {false, true}) {
      auto It = Compiling.find(keyOf(Name, Fused));
      if (It != Compiling.end())
        A->Cubins.push_back(It->second);
    }
    // Generated or checked already, and it cannot run: not worth timing.
    auto Unfused = P.Kernels.find(keyOf(Name, false));
    if (Unfused != P.Kernels.end())
      Out[I].Error = Unfused->second.Error;
    if (!All.empty())
      Out[I].Built = std::move(A);
  }
  return Out;
}

void CudaSession::compileAhead(const MultiTemplateBufferNode &N,
                               const Workload &W,
                               llvm::function_ref<bool(size_t)> Want) {
  if (!hasChoiceKernels(N))
    return;
  Prepared &P = slot(N, W);
  if (P.Compiling || P.Ready)
    return;
  llvm::Expected<const DeviceInfo &> Info = deviceInfo(Opts.GpuOrdinal);
  if (!Info) {
    // openGpu() says why, for every choice.
    llvm::consumeError(Info.takeError());
    return;
  }
  P.Compiling = true;
  int Arch = Info->Major * 10 + Info->Minor;
  BenchSupport::compileAhead(Arch, compileOptionsOf(Opts));
  startCompile(N, P, *Info, *loadDriver(), Want);
}

/// The fp64 reference of check row Index of P (the node alone, and with
/// its epilogue fused and as its own kernel); an error message, or empty.
/// Rows are independent: prepare() computes them in parallel.
static std::string referenceRow(const MultiTemplateBufferNode &N, Prepared &P,
                                llvm::ArrayRef<const Node *> Chain,
                                size_t Index) {
  int64_t R = P.CheckRows[Index];
  int64_t Rows = P.Rows;
  // Read-only from here: rows run in parallel. A GEMM's weights are
  // stored whole (prepare() did that); the rest is drawn row by row.
  const DrawnValues &Host = P.Host;
  // Computed on the GPU already, or else here.
  std::vector<double> Row = P.RefMain[Index];
  if (!Row.empty()) {
  } else if (Row.assign(P.N, 0.0); N.getOp() == OpCode::MatMul) {
    const TensorType &BT = N.getOperand(1)->getType();
    int64_t M1 =
        N.getOperand(0)->getType().Shape[N.getOperand(0)->getType().rank() - 2];
    std::vector<double> A = Host.slice(N.getOperand(0), R * P.K, P.K);
    const double *B =
        Host.data(N.getOperand(1)) + (BT.rank() > 2 ? (R / M1) * P.K * P.N : 0);
    for (int64_t Kk = 0; Kk < P.K; ++Kk)
      for (int64_t C = 0; C < P.N; ++C)
        Row[C] += A[Kk] * B[Kk * P.N + C];
    // fp8 operands: their scales, per tensor or rowwise (2-D operands).
    if (N.getNumOperands() == 4) {
      const Value *SA = N.getOperand(2), *SB = N.getOperand(3);
      for (int64_t C = 0; C < P.N; ++C)
        Row[C] *= Host.at(SA, Host.size(SA) == 1 ? 0 : R) *
                  Host.at(SB, Host.size(SB) == 1 ? 0 : C);
    }
  } else if (N.getOp() == OpCode::SwiGlu) {
    std::vector<double> A = Host.slice(N.getOperand(0), R * P.K, P.K);
    // Batched weights: row R's batch's [K, N].
    const TensorType &AT = N.getOperand(0)->getType();
    int64_t W0 = N.getOperand(1)->getType().rank() > 2
                     ? (R / AT.Shape[AT.rank() - 2]) * P.K * P.N
                     : 0;
    const double *Wg = Host.data(N.getOperand(1)) + W0;
    const double *Wu = Host.data(N.getOperand(2)) + W0;
    std::vector<double> U(P.N, 0.0);
    for (int64_t Kk = 0; Kk < P.K; ++Kk)
      for (int64_t C = 0; C < P.N; ++C) {
        Row[C] += A[Kk] * Wg[Kk * P.N + C];
        U[C] += A[Kk] * Wu[Kk * P.N + C];
      }
    for (int64_t C = 0; C < P.N; ++C)
      Row[C] = Row[C] / (1 + std::exp(-Row[C])) * U[C];
  } else if (OpUnitRowReferenceFn RowRef =
                 lookupOpUnitRowReference(N.getOp())) {
    // An op unit with kernel choices (conv2d): its own row reference, on
    // its operands stored whole by prepare().
    std::vector<const double *> Operands;
    for (const Operand &O : N.getOperands())
      Operands.push_back(Host.data(O.V));
    if (llvm::Error E = RowRef(N, Operands, R, Row))
      return "%" + N.getName() + ": " + llvm::toString(std::move(E));
  } else if (std::optional<AttentionShape> S = attentionShapeOf(N)) {
    // The query row and the keys and values it sees, not the whole caches.
    int64_t Head = S->kvHeadOf(R) * S->Skv * S->D;
    int64_t Seen = (S->lastKey(R % S->Sq) + 1) * S->D;
    std::vector<double> Q = Host.slice(N.getOperand(0), R * S->D, S->D);
    std::vector<double> K = Host.slice(N.getOperand(1), Head, Seen);
    std::vector<double> V = Host.slice(N.getOperand(2), Head, Seen);
    std::vector<double> M;
    if (S->HasMask)
      M = Host.slice(N.getOperand(3), S->maskRowOf(R), S->Skv);
    attentionReferenceHeadRow(*S, Q.data(), K.data(), V.data(), R, Row.data(),
                              S->HasMask ? M.data() : nullptr);
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
    std::vector<double> In = Host.slice(N.getResult(), R * P.N, P.N);
    if (llvm::Error E = ApplyChain(In, P.RefWritesEpi))
      return llvm::toString(std::move(E));
    P.RefEpi[Index] = In;
  }
  return std::string();
}

/// Reference rows: all of a small output, else the first, the last and 14
/// random ones.
static std::vector<int64_t> checkRowsOf(int64_t Rows, std::mt19937_64 &Rng) {
  std::vector<int64_t> CheckRows;
  if (Rows <= 64) {
    for (int64_t R = 0; R < Rows; ++R)
      CheckRows.push_back(R);
  } else {
    CheckRows = {0, Rows - 1};
    std::uniform_int_distribution<int64_t> Pick(1, Rows - 2);
    while (CheckRows.size() < 16)
      CheckRows.push_back(Pick(Rng));
  }
  return CheckRows;
}

bool CudaSession::allocOutputs(const MultiTemplateBufferNode &N, Prepared &P) {
  const Value *Last =
      N.getEpilogue().empty() ? N.getResult() : N.getEpilogue().back().V;
  for (int C = 0; C < P.Copies; ++C)
    for (auto [Buf, V] :
         {std::make_pair(&P.OutMain[C], (const Value *)N.getResult()),
          std::make_pair(&P.OutFused[C], Last),
          std::make_pair(&P.OutEpi[C], Last)}) {
      Buf->Bytes = P.Rows * P.N * dtypeBytes(V->getType().Dtype);
      if (G->D->cuMemAlloc(&Buf->P, std::max<size_t>(16, Buf->Bytes))) {
        P.Error = "cannot allocate the output";
        return false;
      }
    }
  return true;
}

bool CudaSession::allocWriteBuffers(const MultiTemplateBufferNode &N,
                                    Prepared &P) {
  // A kernel writing the epilogue's `writes` needs a buffer for each,
  // allocated before the first check poisons it.
  for (const Operand &Wr : N.getEpilogueWrites()) {
    std::vector<DevBuf> &Bufs = P.Scratch[Wr.V];
    Bufs.resize(P.Copies);
    for (DevBuf &B : Bufs) {
      B.Bytes = P.Rows * Wr.V->getType().innerDim() *
                dtypeBytes(Wr.V->getType().Dtype);
      if (G->D->cuMemAlloc(&B.P, std::max<size_t>(16, B.Bytes))) {
        P.Error = "cannot allocate the output '%" + Wr.V->getName() + "'";
        return false;
      }
    }
  }
  return true;
}

bool CudaSession::gpuReferenceRows(const MultiTemplateBufferNode &N,
                                   Prepared &P, BenchSupport &Support) {
  size_t NumRows = P.CheckRows.size();
  // The GEMM's own rows on the GPU, from its device inputs (copy 0).
  const Value *A = N.getOperand(0);
  const TensorType &AT = A->getType();
  int64_t M1 = AT.rank() >= 2 ? AT.Shape[AT.rank() - 2] : 1;
  auto RowsOf = [&](const Value *B) {
    return Support.gemmRows(P.Dev[A][0].P, P.Dev[B][0].P, AT.Dtype, P.CheckRows,
                            P.K, P.N, M1, B->getType().rank() > 2, G->Stream);
  };
  if (N.getOp() == OpCode::MatMul) {
    auto R = RowsOf(N.getOperand(1));
    if (!R) {
      P.Error = llvm::toString(R.takeError());
      return false;
    }
    P.RefMain = std::move(*R);
  } else if (N.getOp() == OpCode::SwiGlu) {
    auto Gate = RowsOf(N.getOperand(1));
    auto Up = Gate ? RowsOf(N.getOperand(2)) : Gate.takeError();
    if (!Up) {
      P.Error = llvm::toString(Up.takeError());
      return false;
    }
    for (size_t I = 0; I < NumRows; ++I) {
      std::vector<double> &Gr = (*Gate)[I];
      for (int64_t C = 0; C < P.N; ++C)
        Gr[C] = Gr[C] / (1 + std::exp(-Gr[C])) * (*Up)[I][C];
    }
    P.RefMain = std::move(*Gate);
  }
  return true;
}

/// The bound V's elements must stay below as an index operand of op unit
/// N (OpUnitInfo::IndexBound; the smallest if it is several), else 0.
static int64_t indexBoundOf(const Node &N, const Value *V) {
  int64_t Bound = 0;
  if (const OpUnitInfo *U = lookupOpUnitInfo(N.getOp()); U && U->IndexBound)
    for (unsigned I = 0; I < N.getNumOperands(); ++I)
      if (N.getOperand(I) == V)
        if (std::optional<int64_t> B = U->IndexBound(N, I))
          Bound = Bound ? std::min(Bound, *B) : *B;
  return Bound;
}

/// Why N's choices cannot be checked: an op unit with kernel choices but no
/// row reference would be checked against nothing. Empty if they can.
static std::string missingRowReference(const MultiTemplateBufferNode &N) {
  if (lookupOpUnitRowReference(N.getOp()))
    return "";
  return "op '" + getOpInfo(N.getOp()).Name.str() +
         "' has kernel choices but no row reference to check them by";
}

/// Sizes P's reference rows before they are filled in parallel, each task
/// its own slot: the node's, and with an epilogue the fused and unfused
/// forms' and those of each value the fused kernel also writes.
static void sizeReferenceRows(const MultiTemplateBufferNode &N, Prepared &P,
                              size_t NumRows) {
  P.RefMain.assign(NumRows, {});
  if (N.getEpilogue().empty())
    return;
  P.RefFused.assign(NumRows, {});
  P.RefEpi.assign(NumRows, {});
  for (const Operand &Wr : N.getEpilogueWrites()) {
    P.RefWritesFused[Wr.V].assign(NumRows, {});
    P.RefWritesEpi[Wr.V].assign(NumRows, {});
  }
}

Prepared &CudaSession::prepare(const MultiTemplateBufferNode &N,
                               const Workload &W) {
  int64_t OwnRows = rowsOf(N.getType());
  Prepared &P = slot(N, W);
  if (P.Ready)
    return P;
  P.Ready = true;
  int64_t Rows = P.Rows;
  llvm::TimeTraceScope Scope("cuda.prepare", "%" + N.getName());

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
  // Inputs are filled on the GPU (weights of up to hundreds of millions of
  // elements, activations in each of up to 8 copies), not copied from the
  // host. A GEMM's reference rows are computed there too, from its
  // operands. What a reference on the host reads (the epilogue's inputs,
  // the node's own result, a non-GEMM node's operands) is drawn there on
  // demand, the same values (DrawnValues.h).
  bool Gemm = N.getOp() == OpCode::MatMul || N.getOp() == OpCode::SwiGlu;
  // The GPU reference reads every operand as one element type.
  bool SameType = llvm::all_of(N.getOperands(), [&](const Operand &O) {
    return O.V->getType().Dtype == N.getOperand(0)->getType().Dtype;
  });
  BenchSupport *Fills = support(*G, compileOptionsOf(Opts));
  BenchSupport *Support = Gemm && SameType ? Fills : nullptr;
  std::vector<const Node *> Chain;
  for (const Operand &E : N.getEpilogue())
    Chain.push_back(E.V->getDef());
  // An op unit with kernel choices is checked against its row reference,
  // which reads its operands whole.
  bool RowRef = hasOpUnitChoices(N.getOp());
  if (RowRef && !(P.Error = missingRowReference(N)).empty())
    return P;
  // The weights (and scales) a GEMM's reference on the host reads whole.
  auto ReadWhole = [&](const Value *V) {
    if (RowRef)
      return llvm::any_of(N.getOperands(),
                          [&](const Operand &O) { return O.V == V; });
    return Gemm && !Support &&
           llvm::any_of(llvm::drop_begin(N.getOperands()),
                        [&](const Operand &O) { return O.V == V; });
  };
  for (auto [Stream, V] : llvm::enumerate(Values)) {
    DType T = V->getType().Dtype;
    int64_t Count = NumAt(V);
    size_t Bytes = size_t(Count) * dtypeBytes(T);
    // An op unit's index operand (grouped_mm's expert ids) draws valid
    // indices, on the host.
    int64_t Bound = indexBoundOf(N, V);
    bool Device = Fills && BenchSupport::canFill(T) && !Bound;
    P.Host.add(V, Count, Opts.Seed, Stream, T, Bound);
    if (ReadWhole(V))
      P.Host.store(V);
    std::string HostBytes;
    if (!Device)
      HostBytes = toDeviceBytes(P.Host.store(V), T);
    for (int C = 0; C < P.Copies; ++C) {
      DevBuf B;
      B.Bytes = Bytes;
      bool Failed = G->D->cuMemAlloc(&B.P, std::max<size_t>(16, B.Bytes));
      if (!Failed && Device) {
        if (llvm::Error E =
                Fills->fill(B.P, Count, T, Opts.Seed, Stream, G->Stream)) {
          P.Error = llvm::toString(std::move(E));
          return P;
        }
      } else if (!Failed) {
        Failed =
            G->D->cuMemcpyHtoDAsync(B.P, HostBytes.data(), B.Bytes, G->Stream);
      }
      if (Failed) {
        P.Error = "cannot allocate or fill " + std::to_string(B.Bytes) +
                  " bytes for '%" + V->getName() + "'";
        return P;
      }
      P.Dev[V].push_back(B);
    }
  }
  if (Fills && syncStream(*G->D, G->Stream, "filling the inputs")) {
    P.Error = "filling the inputs failed";
    return P;
  }
  if (!allocOutputs(N, P))
    return P;

  Phase.emplace("cuda.prepare.reference");
  P.CheckRows = checkRowsOf(Rows, Rng);
  for (const Node *C : Chain)
    if (std::optional<ElementMap> Map =
            isLayout(C->getOp()) ? elementMapOf(*C) : std::nullopt)
      P.OutMaps.push_back(std::move(*Map));
  if (!allocWriteBuffers(N, P))
    return P;
  // One row per task: a check row of a 4096-wide GEMM is 16M multiply-adds
  // in fp64, and a decode GEMM checks every one of its rows.
  size_t NumRows = P.CheckRows.size();
  sizeReferenceRows(N, P, NumRows);
  if (Support && !gpuReferenceRows(N, P, *Support))
    return P;
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
  // Not built ahead (a node timed without a build, as the tests do): every
  // choice's kernel now.
  if (!P.Compiling && hasChoiceKernels(N))
    startCompile(N, P, G->Info, *G->D, [](size_t) { return true; });
  loadCompiled(P);
  return P;
}
