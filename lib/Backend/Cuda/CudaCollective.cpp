//===- CudaCollective.cpp - Timing collectives across GPUs ----------------===//
//
// One rank per GPU (device = rank % devices, its primary context). NCCL
// communicators come from ncclCommInitRank with a unique id made on rank 0
// and broadcast through the Communicator. Peer-memory kernels read and write
// peers' buffers through CUDA peer access; buffer addresses are exchanged
// with allGather: as plain pointers between thread ranks (one address
// space), as CUDA IPC handles between MPI processes, each of which opens its
// peers' handles and closes them before the owner frees the memory.
//
// Every step whose outcome could differ between ranks (set-up, the
// correctness check, the number of launches per sample) is agreed with
// allReduceMax before the next collective launch, so a rank that fails
// makes every rank fail the choice instead of leaving a peer waiting
// inside NCCL or a spinning kernel.
//
//===----------------------------------------------------------------------===//
#include "CudaCollective.h"
#include "mtsched/Backend/Cuda/CollectiveCodegen.h"
#include "mtsched/Backend/Cuda/CudaApi.h"
#include "mtsched/Backend/Cuda/CudaCompiler.h"
#include "mtsched/Backend/Cuda/NcclApi.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <sstream>

using namespace mtsched;
using namespace mtsched::cuda;
using namespace mtsched::nccl;

CollectiveRank::~CollectiveRank() = default;

namespace {

constexpr double Inf = std::numeric_limits<double>::infinity();

Measurement failedM(ChoiceStatus S, std::string Msg) {
  Measurement M;
  M.Status = S;
  M.Us = Inf;
  M.Message = std::move(Msg);
  return M;
}

uint16_t toBf16(float F) {
  uint32_t U;
  std::memcpy(&U, &F, 4);
  U += 0x7fff + ((U >> 16) & 1);
  return uint16_t(U >> 16);
}
float fromBf16(uint16_t H) {
  uint32_t U = uint32_t(H) << 16;
  float F;
  std::memcpy(&F, &U, 4);
  return F;
}
uint16_t toF16(float F) {
  // Round to nearest via the hardware-free path: good enough for [-1, 1).
  uint32_t U;
  std::memcpy(&U, &F, 4);
  uint32_t Sign = (U >> 16) & 0x8000;
  int Exp = int((U >> 23) & 0xff) - 127 + 15;
  uint32_t Man = U & 0x7fffff;
  if (Exp <= 0) {
    if (Exp < -10)
      return uint16_t(Sign);
    Man |= 0x800000;
    uint32_t Shift = uint32_t(14 - Exp);
    uint32_t H = Man >> Shift;
    if ((Man >> (Shift - 1)) & 1)
      ++H;
    return uint16_t(Sign | H);
  }
  uint32_t H = Sign | (uint32_t(Exp) << 10) | (Man >> 13);
  if (Man & 0x1000)
    ++H;
  return uint16_t(H);
}
float fromF16(uint16_t H) {
  uint32_t Sign = uint32_t(H & 0x8000) << 16;
  int Exp = (H >> 10) & 0x1f;
  uint32_t Man = H & 0x3ff;
  float F;
  if (Exp == 0)
    F = std::ldexp(float(Man), -24);
  else if (Exp == 31)
    F = Man ? NAN : INFINITY;
  else
    F = std::ldexp(float(Man | 0x400), Exp - 25);
  uint32_t U;
  std::memcpy(&U, &F, 4);
  U |= Sign;
  std::memcpy(&F, &U, 4);
  return F;
}

/// Seeded values in [-1, 1), rounded to T, as device bytes and as doubles.
void randomData(uint64_t Seed, int64_t N, DType T, std::string &Bytes,
                std::vector<float> &Vals) {
  unsigned Sz = dtypeBytes(T);
  Bytes.assign(size_t(N) * Sz, '\0');
  Vals.resize(size_t(N));
  uint64_t X = Seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  for (int64_t I = 0; I < N; ++I) {
    X ^= X << 13;
    X ^= X >> 7;
    X ^= X << 17;
    float F = float(double(X >> 11) / double(1ull << 53) * 2 - 1);
    if (T == DType::BF16) {
      uint16_t H = toBf16(F);
      std::memcpy(&Bytes[size_t(I) * 2], &H, 2);
      Vals[size_t(I)] = fromBf16(H);
    } else if (T == DType::F16) {
      uint16_t H = toF16(F);
      std::memcpy(&Bytes[size_t(I) * 2], &H, 2);
      Vals[size_t(I)] = fromF16(H);
    } else {
      std::memcpy(&Bytes[size_t(I) * 4], &F, 4);
      Vals[size_t(I)] = F;
    }
  }
}

double valueAt(const std::string &Bytes, int64_t I, DType T) {
  if (T == DType::F32) {
    float F;
    std::memcpy(&F, &Bytes[size_t(I) * 4], 4);
    return F;
  }
  uint16_t H;
  std::memcpy(&H, &Bytes[size_t(I) * 2], 2);
  return T == DType::BF16 ? fromBf16(H) : fromF16(H);
}

double tol(DType T) {
  return T == DType::BF16 ? 2e-2 : T == DType::F16 ? 5e-3 : 1e-3;
}

struct MtPtrs {
  CUdeviceptr P[MaxCollectiveRanks];
};

class CollectiveRankImpl : public CollectiveRank {
public:
  CollectiveRankImpl(const AutotuneOptions &Opts, Communicator &Comm)
      : Opts(Opts), Comm(Comm) {}
  ~CollectiveRankImpl() override;
  Measurement measure(const MultiTemplateBufferNode &N, const Workload &W,
                      const Choice &C, bool Fused,
                      const std::string &LocalFault) override;

private:
  struct Buffers {
    std::string Key;
    int64_t InElems = 0, OutElems = 0, Cols = 0;
    DType T = DType::BF16;
    int Copies = 1;
    std::vector<CUdeviceptr> In, Out;    // own, per copy
    std::vector<MtPtrs> PeerIn, PeerOut; // per copy
    /// The second output of an all_reduce whose epilogue `writes` its sum
    /// (own and peers', per copy); empty otherwise.
    std::vector<CUdeviceptr> Sum;
    std::vector<MtPtrs> PeerSum;
    std::vector<CUdeviceptr> Imported; // peers' memory opened by IPC
    CUdeviceptr Bias = 0, Res = 0, Gamma = 0;
    std::vector<std::vector<float>> HostIn; // every rank's input
    std::vector<float> HostBias, HostRes, HostGamma;
  };

  /// Device, streams, peer access, NCCL, flags; Err says why not.
  bool init(std::string &Err);
  bool prepare(const MultiTemplateBufferNode &N, const Workload &W,
               std::string &Err);
  void freeBuffers();
  /// Every rank's Mine, indexed [rank][i]: this rank's own pointers as they
  /// are, a peer's as valid here (opened by IPC between processes and
  /// appended to Imported).
  bool exchangePointers(const std::vector<CUdeviceptr> &Mine,
                        std::vector<std::vector<CUdeviceptr>> &All,
                        std::vector<CUdeviceptr> &Imported, std::string &Err);
  void closeImported(std::vector<CUdeviceptr> &Imported);
  bool agree(bool Ok) {
    std::vector<double> V{Ok ? 0.0 : 1.0};
    return Comm.allReduceMax(V, Opts.ChoiceTimeout) == CommStatus::Ok &&
           V[0] == 0;
  }
  CUfunction kernel(const CollectiveKernel &K, std::string &Err);
  bool check(const std::string &Bytes, const Workload &W, bool Fused,
             const CollectiveEpilogue &E, std::string &Msg);
  /// Checks the second output: the sum after the epilogue's adds.
  bool checkSum(const std::string &Bytes, const CollectiveEpilogue &E,
                std::string &Msg);

  const AutotuneOptions &Opts;
  Communicator &Comm;
  bool Inited = false, InitOk = false;
  std::string InitError, PeerError;
  DeviceInfo Dev;
  const DriverApi *D = nullptr;
  const NcclApi *Nc = nullptr;
  std::string NcclError;
  ncclComm_t NComm = nullptr;
  CUstream Stream = nullptr;
  CUevent E0 = nullptr, E1 = nullptr;
  CUdeviceptr Flags = 0;
  MtPtrs PeerFlags{};
  std::vector<CUdeviceptr> ImportedFlags;
  Buffers B;
  std::map<std::string, CUfunction> Kernels;
  std::vector<CUmodule> Modules;
};

CollectiveRankImpl::~CollectiveRankImpl() {
  if (!InitOk)
    return;
  llvm::consumeError(makeCurrent(Dev));
  D->cuStreamSynchronize(Stream);
  closeImported(ImportedFlags);
  freeBuffers();
  if (NComm)
    Nc->ncclCommDestroy(NComm);
  for (CUmodule M : Modules)
    D->cuModuleUnload(M);
  if (Flags)
    D->cuMemFree(Flags);
}

void CollectiveRankImpl::closeImported(std::vector<CUdeviceptr> &Imported) {
  for (CUdeviceptr P : Imported)
    D->cuIpcCloseMemHandle(P);
  Imported.clear();
}

bool CollectiveRankImpl::exchangePointers(
    const std::vector<CUdeviceptr> &Mine,
    std::vector<std::vector<CUdeviceptr>> &All,
    std::vector<CUdeviceptr> &Imported, std::string &Err) {
  bool Ipc = !Comm.sharesAddressSpace();
  std::string Out;
  bool Ok = true;
  if (Ipc && !(D->cuIpcGetMemHandle && D->cuIpcOpenMemHandle &&
               D->cuIpcCloseMemHandle)) {
    Err = "the CUDA driver has no IPC entry points (cuIpcGetMemHandle), "
          "which MPI ranks need to share device memory";
    Ok = false;
  }
  for (CUdeviceptr P : Mine) {
    if (!Ipc) {
      Out += std::to_string(P) + " ";
      continue;
    }
    CUipcMemHandle H;
    if (Ok) {
      if (CUresult R = D->cuIpcGetMemHandle(&H, P)) {
        Err = "cannot export device memory to peer processes: " +
              D->errorString(R);
        Ok = false;
      }
    }
    if (Ok)
      Out += llvm::toHex(llvm::StringRef(H.Reserved, sizeof(H.Reserved))) + " ";
  }
  std::vector<std::string> Gathered;
  if (!agree(Ok) ||
      Comm.allGather(Out, Gathered, Opts.ChoiceTimeout) != CommStatus::Ok) {
    if (Err.empty())
      Err = "cannot exchange peer buffer addresses";
    return false;
  }
  All.assign(Gathered.size(), {});
  for (size_t R = 0; R < Gathered.size() && Ok; ++R) {
    std::istringstream In(Gathered[R]);
    for (size_t I = 0; I < Mine.size() && Ok; ++I) {
      std::string Word;
      In >> Word;
      if (!Ipc) {
        All[R].push_back(std::stoull(Word));
        continue;
      }
      if (int(R) == Comm.rank()) {
        All[R].push_back(Mine[I]);
        continue;
      }
      CUipcMemHandle H;
      std::string Raw = llvm::fromHex(Word);
      CUdeviceptr P = 0;
      CUresult Res = 1;
      if (Raw.size() == sizeof(H.Reserved)) {
        std::memcpy(H.Reserved, Raw.data(), sizeof(H.Reserved));
        Res = D->cuIpcOpenMemHandle(&P, H, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
      }
      if (Res) {
        Err = "cannot open rank " + std::to_string(R) +
              "'s device memory (CUDA IPC): " + D->errorString(Res);
        Ok = false;
        break;
      }
      Imported.push_back(P);
      All[R].push_back(P);
    }
  }
  if (!agree(Ok)) {
    closeImported(Imported);
    if (Err.empty())
      Err = "a peer rank could not open this rank's device memory";
    return false;
  }
  return true;
}

void CollectiveRankImpl::freeBuffers() {
  closeImported(B.Imported);
  for (CUdeviceptr P : B.In)
    D->cuMemFree(P);
  for (CUdeviceptr P : B.Out)
    D->cuMemFree(P);
  for (CUdeviceptr P : B.Sum)
    D->cuMemFree(P);
  for (CUdeviceptr P : {B.Bias, B.Res, B.Gamma})
    if (P)
      D->cuMemFree(P);
  B = Buffers();
}

bool CollectiveRankImpl::init(std::string &Err) {
  if (Inited) {
    Err = InitError;
    return InitOk;
  }
  Inited = true;
  int Count = deviceCount();
  int Ranks = Comm.size(), Rank = Comm.rank();
  bool Ok = true;
  if (Count < Ranks) {
    InitError = "a " + std::to_string(Ranks) +
                "-rank collective needs one GPU per rank; this machine has " +
                std::to_string(Count);
    Ok = false;
  }
  if (Ok) {
    llvm::Expected<DeviceInfo> I = openDevice(Rank % Count);
    if (!I) {
      InitError = llvm::toString(I.takeError());
      Ok = false;
    } else {
      Dev = *I;
      D = &*loadDriver();
    }
  }
  if (Ok && (D->cuStreamCreate(&Stream, CU_STREAM_NON_BLOCKING) ||
             D->cuEventCreate(&E0, CU_EVENT_DEFAULT) ||
             D->cuEventCreate(&E1, CU_EVENT_DEFAULT) ||
             D->cuMemAlloc(&Flags, CollectiveFlagBytes) ||
             D->cuMemsetD8Async(Flags, 0, CollectiveFlagBytes, Stream) ||
             D->cuStreamSynchronize(Stream))) {
    InitError = "cannot set up a stream, events or flags on device " +
                std::to_string(Dev.Ordinal);
    Ok = false;
  }
  // Peer access to every other rank's device (a failure only rules out the
  // peer-memory kernels).
  if (Ok) {
    for (int R = 0; R < Ranks; ++R) {
      int Other = R % Count;
      if (Other == Dev.Ordinal)
        continue;
      int Can = 0;
      D->cuDeviceCanAccessPeer(&Can, Dev.Ordinal, Other);
      CUcontext PeerCtx = nullptr;
      CUdevice PD = 0;
      D->cuDeviceGet(&PD, Other);
      if (!Can || D->cuDevicePrimaryCtxRetain(&PeerCtx, PD)) {
        PeerError = "device " + std::to_string(Dev.Ordinal) +
                    " cannot access device " + std::to_string(Other);
        continue;
      }
      CUresult Res = D->cuCtxEnablePeerAccess(PeerCtx, 0);
      if (Res && Res != 704 /*CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED*/)
        PeerError = "cannot enable peer access from device " +
                    std::to_string(Dev.Ordinal) + " to device " +
                    std::to_string(Other) + ": " + D->errorString(Res);
    }
  }
  // Everyone must be set up before NCCL and the flag exchange.
  if (!agree(Ok)) {
    if (InitError.empty())
      InitError = "a peer rank could not set up its GPU";
    Err = InitError;
    return false;
  }
  // Peer kernels run on every rank or on none; NCCL needs no peer memory.
  if (!agree(PeerError.empty()) && PeerError.empty())
    PeerError = "a peer rank cannot reach the other GPUs";
  std::vector<std::vector<CUdeviceptr>> AllFlags;
  std::string FlagError;
  if (PeerError.empty()) {
    if (exchangePointers({Flags}, AllFlags, ImportedFlags, FlagError))
      for (int R = 0; R < Ranks; ++R)
        PeerFlags.P[R] = AllFlags[size_t(R)][0];
    else
      PeerError = FlagError;
  }
  // NCCL: the id from rank 0, then every rank joins at once.
  std::string Id;
  llvm::Expected<const NcclApi &> NOr = loadNccl();
  bool NOk = bool(NOr);
  if (!NOk)
    NcclError = llvm::toString(NOr.takeError());
  else
    Nc = &*NOr;
  if (NOk && Rank == 0) {
    ncclUniqueId U;
    if (ncclResult_t R = Nc->ncclGetUniqueId(&U)) {
      NcclError = "ncclGetUniqueId failed: " + Nc->errorString(R);
      NOk = false;
    } else {
      Id.assign(U.Internal, sizeof(U.Internal));
    }
  }
  if (!agree(NOk) ||
      Comm.broadcast(Id, 0, Opts.ChoiceTimeout) != CommStatus::Ok ||
      Id.size() != sizeof(ncclUniqueId)) {
    if (NcclError.empty())
      NcclError = "a peer rank could not open NCCL";
  } else {
    ncclUniqueId U;
    std::memcpy(U.Internal, Id.data(), sizeof(U.Internal));
    if (ncclResult_t R = Nc->ncclCommInitRank(&NComm, Ranks, U, Rank)) {
      NcclError = "ncclCommInitRank failed: " + Nc->errorString(R);
      NComm = nullptr;
    }
    if (!agree(NComm != nullptr) && NcclError.empty())
      NcclError = "ncclCommInitRank failed on a peer rank";
  }
  InitOk = true;
  return true;
}

bool CollectiveRankImpl::prepare(const MultiTemplateBufferNode &N,
                                 const Workload &W, std::string &Err) {
  DType T = N.getOperand(0)->getType().Dtype;
  int64_t InElems = W.Bytes / dtypeBytes(T);
  int Ranks = Comm.size();
  int64_t OutElems = InElems;
  if (W.Collective == CollectiveKind::AllGather)
    OutElems = InElems * Ranks;
  if (W.Collective == CollectiveKind::ReduceScatter)
    OutElems = InElems / Ranks;
  int64_t Cols = N.getOperand(0)->getType().Shape.empty()
                     ? InElems
                     : N.getOperand(0)->getType().Shape.back();
  if (Cols <= 0 || InElems % Cols)
    Cols = InElems;
  // A fused epilogue that also writes its sum needs a second output, peer-
  // visible like the first (two_shot writes every rank's); nodes of one
  // name and shape differ in that.
  bool WantSum = W.Collective == CollectiveKind::AllReduce &&
                 !N.getEpilogueWrites().empty();
  std::string Key = std::to_string(InElems) + "/" + std::to_string(Cols) + "/" +
                    std::string(dtypeName(T)) + "/" +
                    std::string(collectiveKindName(W.Collective)) + "/" +
                    N.getName() + (WantSum ? "/sum" : "");
  if (Key == B.Key)
    return true;
  // Peers may still be inside a kernel reading our buffers, or hold them
  // open: close ours, then meet, then free.
  if (!B.Key.empty()) {
    D->cuStreamSynchronize(Stream);
    closeImported(B.Imported);
    Comm.barrier(Opts.ChoiceTimeout);
    freeBuffers();
  }
  B.Key = Key;
  B.T = T;
  B.InElems = InElems;
  B.OutElems = OutElems;
  B.Cols = Cols;
  size_t InB = size_t(InElems) * dtypeBytes(T),
         OutB = size_t(OutElems) * dtypeBytes(T);
  double L2 = 3.0 * 64 * 1024 * 1024; // 3x the L2 (H200: 60 MiB)
  B.Copies =
      int(std::min(8.0, std::max(1.0, std::ceil(L2 / double(InB + OutB)))));
  std::string Bytes, Scratch;
  bool Ok = true;
  B.HostIn.resize(size_t(Ranks));
  for (int R = 0; R < Ranks; ++R)
    randomData(Opts.Seed * 1000 + 17 + uint64_t(R), InElems, T,
               R == Comm.rank() ? Bytes : Scratch, B.HostIn[size_t(R)]);
  for (int C = 0; C < B.Copies && Ok; ++C) {
    CUdeviceptr I = 0, O = 0;
    if (D->cuMemAlloc(&I, InB) || D->cuMemAlloc(&O, OutB) ||
        D->cuMemcpyHtoD(I, Bytes.data(), InB)) {
      Ok = false;
      Err = "cannot allocate " + std::to_string(InB + OutB) +
            " bytes on device " + std::to_string(Dev.Ordinal);
    }
    if (I)
      B.In.push_back(I);
    if (O)
      B.Out.push_back(O);
  }
  for (int C = 0; WantSum && C < B.Copies && Ok; ++C) {
    CUdeviceptr S = 0;
    if (D->cuMemAlloc(&S, InB)) {
      Ok = false;
      Err = "cannot allocate " + std::to_string(InB) + " bytes on device " +
            std::to_string(Dev.Ordinal);
    } else {
      B.Sum.push_back(S);
    }
  }
  // Epilogue operands, the same on every rank (replicated tensors).
  int64_t ColsN = Cols;
  std::string EB;
  auto Extra = [&](CUdeviceptr &P, std::vector<float> &H, int64_t Nn,
                   uint64_t S) {
    randomData(Opts.Seed * 1000 + S, Nn, T, EB, H);
    if (S == 903) // rmsnorm weights near 1
      for (size_t I = 0; I < H.size(); ++I) {
        float F = 1.0f + 0.25f * H[I];
        uint16_t Hh = T == DType::BF16 ? toBf16(F) : toF16(F);
        if (T == DType::F32)
          std::memcpy(&EB[I * 4], &F, 4);
        else
          std::memcpy(&EB[I * 2], &Hh, 2);
        H[I] = T == DType::BF16  ? fromBf16(Hh)
               : T == DType::F16 ? fromF16(Hh)
                                 : F;
      }
    if (D->cuMemAlloc(&P, EB.size()) ||
        D->cuMemcpyHtoD(P, EB.data(), EB.size()))
      Ok = false;
  };
  if (Ok && W.Collective == CollectiveKind::AllReduce) {
    Extra(B.Bias, B.HostBias, ColsN, 901);
    Extra(B.Res, B.HostRes, InElems, 902);
    Extra(B.Gamma, B.HostGamma, ColsN, 903);
  }
  if (!agree(Ok)) {
    if (Err.empty())
      Err = "a peer rank could not allocate its buffers";
    freeBuffers();
    return false;
  }
  std::vector<CUdeviceptr> Mine;
  size_t PerCopy = B.Sum.empty() ? 2 : 3;
  for (int C = 0; C < B.Copies; ++C) {
    Mine.push_back(B.In[size_t(C)]);
    Mine.push_back(B.Out[size_t(C)]);
    if (!B.Sum.empty())
      Mine.push_back(B.Sum[size_t(C)]);
  }
  if (!PeerError.empty())
    return true; // only nccl runs; it needs no peer pointers
  std::vector<std::vector<CUdeviceptr>> All;
  if (!exchangePointers(Mine, All, B.Imported, Err)) {
    freeBuffers();
    return false;
  }
  B.PeerIn.assign(size_t(B.Copies), MtPtrs{});
  B.PeerOut.assign(size_t(B.Copies), MtPtrs{});
  B.PeerSum.assign(size_t(B.Copies), MtPtrs{});
  for (int R = 0; R < Ranks; ++R)
    for (size_t C = 0; C < size_t(B.Copies); ++C) {
      B.PeerIn[C].P[R] = All[size_t(R)][PerCopy * C];
      B.PeerOut[C].P[R] = All[size_t(R)][PerCopy * C + 1];
      if (PerCopy == 3)
        B.PeerSum[C].P[R] = All[size_t(R)][PerCopy * C + 2];
    }
  return true;
}

CUfunction CollectiveRankImpl::kernel(const CollectiveKernel &K,
                                      std::string &Err) {
  auto It = Kernels.find(K.Name);
  if (It != Kernels.end())
    return It->second;
  std::vector<llvm::Expected<std::string>> Cubins =
      compileAll({{K.Name, K.Source}}, Dev.Major * 10 + Dev.Minor);
  if (!Cubins[0]) {
    Err = "failed to compile: " + llvm::toString(Cubins[0].takeError());
    return nullptr;
  }
  CUmodule M = nullptr;
  CUfunction F = nullptr;
  if (CUresult R = D->cuModuleLoadData(&M, Cubins[0]->data())) {
    Err = "cannot load the module: " + D->errorString(R);
    return nullptr;
  }
  Modules.push_back(M);
  if (CUresult R = D->cuModuleGetFunction(&F, M, K.Name.c_str())) {
    Err = "no entry point: " + D->errorString(R);
    return nullptr;
  }
  Kernels[K.Name] = F;
  return F;
}

bool CollectiveRankImpl::checkSum(const std::string &Bytes,
                                  const CollectiveEpilogue &E,
                                  std::string &Msg) {
  int64_t N = B.InElems;
  double E2 = 0, R2 = 0;
  bool Finite = true;
  auto Cmp = [&](int64_t I) {
    double Ref = 0;
    for (size_t R = 0; R < B.HostIn.size(); ++R)
      Ref += B.HostIn[R][size_t(I)];
    if (E.Bias)
      Ref += B.HostBias[size_t(I % B.Cols)];
    if (E.Residual)
      Ref += B.HostRes[size_t(I)];
    double V = valueAt(Bytes, I, B.T);
    if (!std::isfinite(V))
      Finite = false;
    E2 += (V - Ref) * (V - Ref);
    R2 += Ref * Ref;
  };
  int64_t Step = std::max<int64_t>(1, N / (1 << 21));
  for (int64_t I = 0; I < N; I += Step)
    Cmp(I);
  // The ragged tail past the last full vector, always.
  for (int64_t I = std::max<int64_t>(0, N - 16); I < N; ++I)
    Cmp(I);
  double Rel = R2 > 0 ? std::sqrt(E2 / R2) : std::sqrt(E2);
  if (Finite && Rel <= tol(B.T))
    return true;
  Msg = "second output (the sum) on rank " + std::to_string(Comm.rank()) +
        " differs from the fp64 reference: relative error " +
        llvm::formatv("{0:e2}", Rel).str() + " > " +
        llvm::formatv("{0:e0}", tol(B.T)).str();
  return false;
}

bool CollectiveRankImpl::check(const std::string &Bytes, const Workload &W,
                               bool Fused, const CollectiveEpilogue &E,
                               std::string &Msg) {
  int Ranks = Comm.size(), Rank = Comm.rank();
  int64_t N = B.OutElems;
  double E2 = 0, R2 = 0;
  bool Finite = true;
  auto Cmp = [&](int64_t I, double Ref) {
    double V = valueAt(Bytes, I, B.T);
    if (!std::isfinite(V))
      Finite = false;
    E2 += (V - Ref) * (V - Ref);
    R2 += Ref * Ref;
  };
  auto Sum = [&](int64_t I) {
    double S = 0;
    for (int R = 0; R < Ranks; ++R)
      S += B.HostIn[size_t(R)][size_t(I)];
    return S;
  };
  if (W.Collective == CollectiveKind::AllGather) {
    int64_t Step = std::max<int64_t>(1, N / (1 << 21));
    for (int64_t I = 0; I < N; I += Step)
      Cmp(I, B.HostIn[size_t(I / B.InElems)][size_t(I % B.InElems)]);
  } else if (W.Collective == CollectiveKind::ReduceScatter) {
    int64_t Step = std::max<int64_t>(1, N / (1 << 21));
    for (int64_t I = 0; I < N; I += Step)
      Cmp(I, Sum(Rank * N + I));
  } else if (!Fused || !E.RmsNorm) {
    auto Ref = [&](int64_t I) {
      double X = Sum(I);
      if (Fused) {
        if (E.Bias)
          X += B.HostBias[size_t(I % B.Cols)];
        if (E.Residual)
          X += B.HostRes[size_t(I)];
        if (E.Activation)
          X = evaluatePointwise(*E.Activation, {X});
      }
      return X;
    };
    int64_t Step = std::max<int64_t>(1, N / (1 << 21));
    for (int64_t I = 0; I < N; I += Step)
      Cmp(I, Ref(I));
    // The ragged tail past the last full vector, always.
    for (int64_t I = std::max<int64_t>(0, N - 16); I < N; ++I)
      Cmp(I, Ref(I));
  } else {
    int64_t Rows = N / B.Cols;
    int64_t Step = std::max<int64_t>(1, Rows / 64);
    std::vector<double> X(size_t(B.Cols));
    for (int64_t Row = 0; Row < Rows;
         Row = Row + Step < Rows || Row == Rows - 1 ? Row + Step : Rows - 1) {
      double SS = 0;
      for (int64_t C = 0; C < B.Cols; ++C) {
        int64_t I = Row * B.Cols + C;
        double V = Sum(I);
        if (E.Bias)
          V += B.HostBias[size_t(C)];
        if (E.Residual)
          V += B.HostRes[size_t(I)];
        X[size_t(C)] = V;
        SS += V * V;
      }
      double Inv = 1 / std::sqrt(SS / double(B.Cols) + E.Eps);
      for (int64_t C = 0; C < B.Cols; ++C)
        Cmp(Row * B.Cols + C, X[size_t(C)] * Inv * B.HostGamma[size_t(C)]);
    }
  }
  double Rel = R2 > 0 ? std::sqrt(E2 / R2) : std::sqrt(E2);
  if (Finite && Rel <= tol(B.T))
    return true;
  Msg = "output on rank " + std::to_string(Rank) +
        " differs from the fp64 reference: relative error " +
        llvm::formatv("{0:e2}", Rel).str() + " > " +
        llvm::formatv("{0:e0}", tol(B.T)).str();
  return false;
}

Measurement CollectiveRankImpl::measure(const MultiTemplateBufferNode &N,
                                        const Workload &W, const Choice &C,
                                        bool Fused,
                                        const std::string &LocalFault) {
  std::string Err = LocalFault;
  bool Ok = Err.empty();
  if (!init(Err) && Ok) {
    Ok = false;
  }
  if (!InitOk)
    return failedM(ChoiceStatus::Failed, Err);
  if (llvm::Error E = makeCurrent(Dev)) {
    Err = llvm::toString(std::move(E));
    Ok = false;
  }
  std::optional<CollectiveAlgo> A = collectiveAlgoOf(C);
  if (Ok && !A) {
    Err = "'" + C.Name + "' is no collective algorithm this backend knows";
    Ok = false;
  }
  if (const Attribute *R = N.getAttrs().get("reduce"))
    if (Ok && R->getString() != "sum") {
      Err = "only reduce = \"sum\" is timed on GPUs, not \"" +
            R->getString().str() + "\"";
      Ok = false;
    }
  if (Ok && !prepare(N, W, Err))
    Ok = false;
  // The launch.
  std::function<CUresult(int)> Launch;
  CollectiveEpilogue Epi;
  if (Ok && *A == CollectiveAlgo::Nccl) {
    if (Fused) {
      Err = "'nccl' is an extern call and cannot fuse";
      Ok = false;
    } else if (!NComm) {
      Err = NcclError;
      Ok = false;
    } else {
      int DT = B.T == DType::BF16  ? ncclBfloat16
               : B.T == DType::F16 ? ncclFloat16
                                   : ncclFloat32;
      size_t Count = size_t(B.InElems);
      switch (W.Collective) {
      case CollectiveKind::AllReduce:
        Launch = [&, DT, Count](int Cp) {
          return Nc->ncclAllReduce((void *)B.In[size_t(Cp)],
                                   (void *)B.Out[size_t(Cp)], Count, DT,
                                   ncclSum, NComm, Stream);
        };
        break;
      case CollectiveKind::AllGather:
        Launch = [&, DT, Count](int Cp) {
          return Nc->ncclAllGather((void *)B.In[size_t(Cp)],
                                   (void *)B.Out[size_t(Cp)], Count, DT, NComm,
                                   Stream);
        };
        break;
      case CollectiveKind::ReduceScatter:
        Launch = [&, DT](int Cp) {
          return Nc->ncclReduceScatter(
              (void *)B.In[size_t(Cp)], (void *)B.Out[size_t(Cp)],
              size_t(B.OutElems), DT, ncclSum, NComm, Stream);
        };
        break;
      default:
        Err = "nccl is not timed for " +
              std::string(collectiveKindName(W.Collective));
        Ok = false;
      }
    }
  } else if (Ok) {
    const Value *BiasV = nullptr, *ResV = nullptr, *GammaV = nullptr;
    if (Fused) {
      llvm::Expected<CollectiveEpilogue> EOr =
          collectiveEpilogueOf(N, BiasV, ResV, GammaV);
      if (!EOr) {
        Err = llvm::toString(EOr.takeError());
        Ok = false;
      } else {
        Epi = *EOr;
      }
    }
    if (Ok && !PeerError.empty()) {
      Err = PeerError;
      Ok = false;
    }
    if (Ok && Epi.WriteSum && B.Sum.empty()) {
      Err = "no buffer for the epilogue's second output";
      Ok = false;
    }
    CollectiveKernelSpec S;
    S.Kind = W.Collective;
    S.Algo = *A;
    S.Dtype = B.T;
    S.Ranks = Comm.size();
    S.Elems = B.InElems;
    S.Cols = B.Cols;
    S.SMs = Dev.SMs;
    S.Epilogue = Epi;
    CUfunction F = nullptr;
    CollectiveKernel K;
    if (Ok) {
      llvm::Expected<CollectiveKernel> KOr = generateCollectiveKernel(S);
      if (!KOr) {
        Err = "no kernel: " + llvm::toString(KOr.takeError());
        Ok = false;
      } else {
        K = *KOr;
        F = kernel(K, Err);
        Ok = F != nullptr;
      }
    }
    if (Ok)
      Launch = [this, F, K](int Cp) {
        MtPtrs In = B.PeerIn[size_t(Cp)], Out = B.PeerOut[size_t(Cp)],
               Fl = PeerFlags, Sums = B.PeerSum[size_t(Cp)];
        unsigned Rank = unsigned(Comm.rank());
        CUdeviceptr Bi = B.Bias, Re = B.Res, Ga = B.Gamma;
        void *Args[] = {&In, &Out, &Fl, &Rank, &Bi, &Re, &Ga, &Sums};
        return D->cuLaunchKernel(F, K.GridX, 1, 1, K.BlockX, 1, 1, 0, Stream,
                                 Args, nullptr);
      };
  }
  if (!agree(Ok))
    return failedM(ChoiceStatus::Failed,
                   Ok ? "a peer rank could not run this choice" : Err);

  // Correctness on every rank.
  auto Sync = [&] { return D->cuStreamSynchronize(Stream); };
  std::string Why;
  bool SumOut = Fused && Epi.WriteSum;
  Ok = !D->cuMemsetD8Async(B.Out[0], 0xff, size_t(B.OutElems) * dtypeBytes(B.T),
                           Stream) &&
       (!SumOut ||
        !D->cuMemsetD8Async(B.Sum[0], 0xff, size_t(B.InElems) * dtypeBytes(B.T),
                            Stream)) &&
       !Sync() && Comm.barrier(Opts.ChoiceTimeout) == CommStatus::Ok;
  CUresult LR = Ok ? Launch(0) : CUDA_SUCCESS;
  CUresult SR = Ok ? Sync() : CUDA_SUCCESS;
  // The peer (two_shot, all-gather) may still be writing into our output
  // until its kernel ended: meet before reading.
  Ok = Ok && !LR && !SR && Comm.barrier(Opts.ChoiceTimeout) == CommStatus::Ok;
  bool Right = false;
  if (Ok) {
    std::string Bytes(size_t(B.OutElems) * dtypeBytes(B.T), '\0');
    Ok = !D->cuMemcpyDtoH(&Bytes[0], B.Out[0], Bytes.size());
    Right = Ok && check(Bytes, W, Fused, Epi, Why);
    if (Right && SumOut) {
      std::string Sums(size_t(B.InElems) * dtypeBytes(B.T), '\0');
      Right = !D->cuMemcpyDtoH(&Sums[0], B.Sum[0], Sums.size()) &&
              checkSum(Sums, Epi, Why);
    }
  } else {
    Why = "the check run failed: " + D->errorString(LR ? LR : SR);
  }
  if (!agree(Right))
    return failedM(Ok ? ChoiceStatus::WrongResult : ChoiceStatus::Failed,
                   Why.empty() ? "a peer rank's output was wrong" : Why);

  // Warm-up and the launches per sample (the same on every rank).
  for (unsigned I = 0; I < std::max(2u, Opts.WarmupRuns); ++I)
    Launch(int(I % unsigned(B.Copies)));
  Sync();
  Comm.barrier(Opts.ChoiceTimeout);
  D->cuEventRecord(E0, Stream);
  for (int I = 0; I < 5; ++I)
    Launch(I % B.Copies);
  D->cuEventRecord(E1, Stream);
  bool TOk = !D->cuEventSynchronize(E1);
  float Ms = 0;
  D->cuEventElapsedTime(&Ms, E0, E1);
  std::vector<double> Est{TOk ? std::max(0.5, double(Ms) * 1000 / 5) : Inf};
  if (Comm.allReduceMax(Est, Opts.ChoiceTimeout) != CommStatus::Ok ||
      !std::isfinite(Est[0]))
    return failedM(ChoiceStatus::Failed, "a timing run failed");
  int PerSample = int(std::min(500.0, std::max(5.0, std::ceil(1000 / Est[0]))));
  double Budget = Est[0] * PerSample * Opts.BenchRuns / 1000;
  if (Budget > double(Opts.ChoiceTimeout.count()))
    return failedM(ChoiceStatus::Timeout, "would run " +
                                              std::to_string(int(Budget)) +
                                              " ms, past the choice timeout");
  // Each sample replays the PerSample launches captured in a CUDA graph
  // (device time without host dispatch), after a barrier; where capture
  // fails on any rank, every rank launches eagerly instead.
  CUgraph Graph = nullptr;
  CUgraphExec Exec = nullptr;
  bool Captured = false;
  if (D->cuStreamBeginCapture && D->cuGraphLaunch &&
      !D->cuStreamBeginCapture(Stream, CU_STREAM_CAPTURE_MODE_RELAXED)) {
    bool LOk = true;
    for (int I = 0; I < PerSample; ++I)
      LOk &= !Launch(I % B.Copies);
    CUresult ER = D->cuStreamEndCapture(Stream, &Graph);
    Captured =
        LOk && !ER && Graph && !D->cuGraphInstantiateWithFlags(&Exec, Graph, 0);
  }
  Captured = agree(Captured);
  auto Cleanup = [&] {
    if (Exec)
      D->cuGraphExecDestroy(Exec);
    if (Graph)
      D->cuGraphDestroy(Graph);
  };
  std::vector<double> Samples;
  for (unsigned S = 0; S < std::max(1u, Opts.BenchRuns); ++S) {
    if (Comm.barrier(Opts.ChoiceTimeout) != CommStatus::Ok) {
      Cleanup();
      return failedM(ChoiceStatus::Failed, "a peer stopped answering");
    }
    D->cuEventRecord(E0, Stream);
    if (Captured)
      D->cuGraphLaunch(Exec, Stream);
    else
      for (int I = 0; I < PerSample; ++I)
        Launch(
            int((S * unsigned(PerSample) + unsigned(I)) % unsigned(B.Copies)));
    D->cuEventRecord(E1, Stream);
    if (CUresult R = D->cuEventSynchronize(E1)) {
      Cleanup();
      return failedM(ChoiceStatus::Failed,
                     "kernel failed: " + D->errorString(R));
    }
    D->cuEventElapsedTime(&Ms, E0, E1);
    Samples.push_back(double(Ms) * 1000 / PerSample);
  }
  Cleanup();
  std::nth_element(Samples.begin(), Samples.begin() + Samples.size() / 2,
                   Samples.end());
  Measurement M;
  M.Us = Samples[Samples.size() / 2];
  if (!Captured)
    M.Message = "timed without a CUDA graph (capture failed)";
  return M;
}

} // namespace

std::unique_ptr<CollectiveRank>
mtsched::createCollectiveRank(const AutotuneOptions &Opts, Communicator &Comm) {
  return std::make_unique<CollectiveRankImpl>(Opts, Comm);
}
