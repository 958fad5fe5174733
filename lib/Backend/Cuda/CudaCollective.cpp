//===- CudaCollective.cpp - Timing collectives across GPUs ----------------===//
//
// One rank per GPU (device = rank % devices, its primary context). NCCL
// communicators come from ncclCommInitRank with a unique id made on rank 0
// and broadcast through the Communicator, opened on a thread of its own
// (CudaNcclStart.cpp). Peer-memory kernels read and write peers' buffers
// through CUDA peer access; buffer addresses are exchanged with allGather: as
// plain pointers between thread ranks (one address space), as CUDA IPC
// handles between MPI processes, each of which opens its peers' handles and
// closes them before the owner frees the memory.
//
// Every step whose outcome could differ between ranks (set-up, the
// correctness check, the number of launches per sample) is agreed with
// allReduceMax before the next collective launch, so a rank that fails
// makes every rank fail the choice instead of leaving a peer waiting
// inside NCCL or a spinning kernel.
//
//===----------------------------------------------------------------------===//
#include "CudaCollectiveImpl.h"
#include "CudaDevice.h"
#include "mtsched/Backend/Cuda/CollectiveCodegen.h"
#include "mtsched/Backend/Cuda/CudaApi.h"
#include "mtsched/Backend/Cuda/CudaCompiler.h"
#include "mtsched/Backend/Cuda/NcclApi.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/TimeProfiler.h"
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <sstream>

using namespace mtsched;
using namespace mtsched::cuda;
using namespace mtsched::nccl;

CollectiveRank::~CollectiveRank() = default;

CollectiveRankImpl::~CollectiveRankImpl() {
  releaseNccl();
  if (!InitOk)
    return;
  llvm::consumeError(makeCurrent(Dev));
  syncStream(*D, Stream, "the collective stream");
  releaseHier();
  closeImported(ImportedFlags);
  freeBuffers();
  if (NComm)
    Nc->ncclCommDestroy(NComm);
  for (CUmodule M : Modules)
    D->cuModuleUnload(M);
  Support.reset();
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
  for (CUdeviceptr P : {B.Arena, B.Bias, B.Res, B.Gamma, B.CountsDev})
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
  llvm::TimeTraceScope Scope("cuda.collective.init");
  int Count = deviceCount();
  int Ranks = Comm.size();
  bool Ok = true;
  if (Count < gpusNeeded()) {
    InitError = "a " + std::to_string(Ranks) +
                "-rank collective needs one GPU per rank; this machine has " +
                std::to_string(Count);
    if (gpusNeeded() != Ranks)
      InitError += " for its " + std::to_string(gpusNeeded()) + " ranks";
    Ok = false;
  }
  if (Ok) {
    llvm::Expected<DeviceInfo> I = openDevice(gpuOrdinal(Count));
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
  // peer-memory kernels). Thread ranks enable it between their primary
  // contexts; an MPI process opens its peers' memory by IPC handle, which
  // enables access itself (CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), so it only
  // asks whether it can: retaining the peer GPU's primary context, only to
  // enable access from it, took about 240 ms of each process's set-up on 2
  // H100s (and a context's memory on every other GPU).
  if (Ok) {
    bool Ipc = !Comm.sharesAddressSpace();
    for (int R = 0; R < Ranks; ++R) {
      int Other = R % Count;
      if (Other == Dev.Ordinal)
        continue;
      int Can = 0;
      D->cuDeviceCanAccessPeer(&Can, Dev.Ordinal, Other);
      if (Can && Ipc)
        continue;
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
  // NCCL, unless startSetUp() started it already.
  startNccl();
  finishNccl();
  InitOk = true;
  return true;
}

CUfunction CollectiveRankImpl::kernel(const CollectiveKernel &K,
                                      std::string &Err) {
  auto It = Kernels.find(K.Name);
  if (It != Kernels.end())
    return It->second;
  llvm::TimeTraceScope Scope("cuda.compile", K.Name);
  std::vector<llvm::Expected<std::string>> Cubins =
      compileAll({{K.Name, K.Source}}, Dev.Major * 10 + Dev.Minor,
                 compileOptionsOf(Opts), &Stats);
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

BenchSupport *CollectiveRankImpl::support() {
  return loadSupportOnce(Support, SupportTried, *D, Dev, compileOptionsOf(Opts),
                         "collective inputs are copied from the host");
}

Measurement CollectiveRankImpl::measure(const MultiTemplateBufferNode &N,
                                        const Workload &W, const Choice &C,
                                        bool Fused,
                                        const std::string &LocalFault) {
  // Set-up runs on every rank, even one with a local fault, up to the
  // agreement: a rank that skipped it would leave its peers waiting.
  std::string Err = LocalFault;
  bool Ok = Err.empty();
  if (!init(Err))
    return failed(ChoiceStatus::Failed, Err);
  if (llvm::Error E = makeCurrent(Dev)) {
    Err = llvm::toString(std::move(E));
    Ok = false;
  }
  // `hier`'s communicators are an exchange: every rank makes them (or
  // fails to) before anything else of the choice, a faulty rank too.
  if (collectiveAlgoOf(C) == CollectiveAlgo::Hier)
    setUpHier();
  CollectiveLaunch L;
  if (Ok)
    Ok = setUpLaunch(N, W, C, Fused, L, Err);
  if (!agree(Ok))
    return failed(ChoiceStatus::Failed,
                  Ok ? "a peer rank could not run this choice" : Err);
  if (std::optional<Measurement> Wrong = checkLaunch(W, Fused, L))
    return *Wrong;
  return timeLaunch(L.Launch);
}

int CollectiveRankImpl::gpuOrdinal(int Count) const {
  int Local = Comm.sharesAddressSpace() ? -1 : Comm.hostIdentity().LocalRank;
  return (Local >= 0 ? Local : Comm.rank()) % std::max(Count, 1);
}

int CollectiveRankImpl::gpusNeeded() const {
  int Local = Comm.sharesAddressSpace() ? 0 : Comm.hostIdentity().LocalSize;
  return Local > 0 ? Local : Comm.size();
}

bool CollectiveRankImpl::setUpLaunch(const MultiTemplateBufferNode &N,
                                     const Workload &W, const Choice &C,
                                     bool Fused, CollectiveLaunch &L,
                                     std::string &Err) {
  std::optional<CollectiveAlgo> A = collectiveAlgoOf(C);
  if (!A) {
    Err = "'" + C.Name + "' is no collective algorithm this backend knows";
    return false;
  }
  // The hierarchical collective's communicators were made (or not) by
  // measure() on every rank.
  if (*A == CollectiveAlgo::Hier && !HierError.empty()) {
    Err = HierError;
    return false;
  }
  if (const Attribute *R = N.getAttrs().get("reduce"))
    if (R->getString() != "sum") {
      Err = "only reduce = \"sum\" is timed on GPUs, not \"" +
            R->getString().str() + "\"";
      return false;
    }
  if (!prepare(N, W, Err))
    return false;
  if (*A == CollectiveAlgo::Nccl)
    return setUpNcclLaunch(W, Fused, L, Err);
  if (*A == CollectiveAlgo::Hier)
    return setUpHierLaunch(N, W, Fused, L, Err);
  return setUpKernelLaunch(N, W, C, *A, Fused, L, Err);
}

bool CollectiveRankImpl::setUpNcclLaunch(const Workload &W, bool Fused,
                                         CollectiveLaunch &L,
                                         std::string &Err) {
  if (Fused) {
    Err = "'nccl' is an extern call and cannot fuse";
    return false;
  }
  if (!NComm) {
    Err = NcclError;
    return false;
  }
  int DT = B.T == DType::BF16  ? ncclBfloat16
           : B.T == DType::F16 ? ncclFloat16
                               : ncclFloat32;
  size_t Count = size_t(B.InElems);
  if (!isFloatDType(B.T) && W.Collective != CollectiveKind::AllToAll) {
    Err = "nccl reduces and gathers float tensors here, not " +
          std::string(dtypeName(B.T));
    return false;
  }
  switch (W.Collective) {
  case CollectiveKind::AllReduce:
    L.Launch = [this, DT, Count](int Cp) {
      return Nc->ncclAllReduce((void *)B.In[size_t(Cp)],
                               (void *)B.Out[size_t(Cp)], Count, DT, ncclSum,
                               NComm, Stream);
    };
    return true;
  case CollectiveKind::AllGather:
    L.Launch = [this, DT, Count](int Cp) {
      return Nc->ncclAllGather((void *)B.In[size_t(Cp)],
                               (void *)B.Out[size_t(Cp)], Count, DT, NComm,
                               Stream);
    };
    return true;
  case CollectiveKind::ReduceScatter:
    L.Launch = [this, DT](int Cp) {
      return Nc->ncclReduceScatter(
          (void *)B.In[size_t(Cp)], (void *)B.Out[size_t(Cp)],
          size_t(B.OutElems), DT, ncclSum, NComm, Stream);
    };
    return true;
  case CollectiveKind::AllToAll:
    L.Launch = B.Ragged ? raggedAllToAllLaunch() : evenAllToAllLaunch();
    return true;
  case CollectiveKind::None:
    // Not a collective: nothing to launch (the node is never one here).
    return true;
  default:
    Err = "nccl is not timed for " +
          std::string(collectiveKindName(W.Collective));
    return false;
  }
}

std::function<CUresult(int)> CollectiveRankImpl::evenAllToAllLaunch() {
  // Chunk p of the input to rank p, chunk p of the output from it; bytes,
  // as nothing is reduced.
  size_t Chunk = size_t(B.InElems) * dtypeBytes(B.T) / Comm.size();
  return [this, Chunk](int Cp) {
    int Ranks = Comm.size();
    CUresult R = CUresult(Nc->ncclGroupStart());
    for (int P = 0; P < Ranks && !R; ++P)
      R = CUresult(Nc->ncclSend((void *)(B.In[size_t(Cp)] + P * Chunk), Chunk,
                                ncclUint8, P, NComm, Stream));
    for (int P = 0; P < Ranks && !R; ++P)
      R = CUresult(Nc->ncclRecv((void *)(B.Out[size_t(Cp)] + P * Chunk), Chunk,
                                ncclUint8, P, NComm, Stream));
    CUresult RE = CUresult(Nc->ncclGroupEnd());
    return R ? R : RE;
  };
}

std::function<CUresult(int)> CollectiveRankImpl::raggedAllToAllLaunch() {
  // Uneven: the counts are device values, so every call waits for the
  // stream (where their producer ran) and reads them back, as a compiled
  // graph must before its NCCL calls and as torch's .tolist() does; then it
  // sends and receives counted rows and zeros the rows past the received.
  return [this](int Cp) {
    int Ranks = Comm.size();
    std::vector<int64_t> Counts(size_t(2 * Ranks));
    if (CUresult R = syncStream(*D, Stream, "an uneven all_to_all"))
      return R;
    if (CUresult R =
            D->cuMemcpyDtoH(Counts.data(), B.CountsDev, Counts.size() * 8))
      return R;
    size_t RowB = size_t(B.RowElems) * dtypeBytes(B.T);
    size_t SendOff = 0, RecvOff = 0;
    CUresult R = CUresult(Nc->ncclGroupStart());
    for (int P = 0; P < Ranks && !R; ++P) {
      size_t S = size_t(Counts[size_t(P)]) * RowB,
             V = size_t(Counts[size_t(Ranks + P)]) * RowB;
      if (S)
        R = CUresult(Nc->ncclSend((void *)(B.In[size_t(Cp)] + SendOff), S,
                                  ncclUint8, P, NComm, Stream));
      if (V && !R)
        R = CUresult(Nc->ncclRecv((void *)(B.Out[size_t(Cp)] + RecvOff), V,
                                  ncclUint8, P, NComm, Stream));
      SendOff += S;
      RecvOff += V;
    }
    CUresult RE = CUresult(Nc->ncclGroupEnd());
    if (R || RE)
      return R ? R : RE;
    size_t OutB = size_t(B.OutElems) * dtypeBytes(B.T);
    return RecvOff < OutB ? D->cuMemsetD8Async(B.Out[size_t(Cp)] + RecvOff, 0,
                                               OutB - RecvOff, Stream)
                          : CUDA_SUCCESS;
  };
}

CUfunction CollectiveRankImpl::collectiveKernel(CollectiveKind Kind,
                                                CollectiveAlgo A, int64_t Elems,
                                                const CollectiveEpilogue &Epi,
                                                CollectiveKernel &K,
                                                std::string &Err) {
  CollectiveKernelSpec S;
  S.Kind = Kind;
  S.Algo = A;
  S.Dtype = B.T;
  S.Ranks = Comm.size();
  S.Elems = Elems;
  S.Cols = B.Cols;
  S.SMs = Dev.SMs;
  S.Epilogue = Epi;
  llvm::Expected<CollectiveKernel> KOr = generateCollectiveKernel(S);
  if (!KOr) {
    Err = "no kernel: " + llvm::toString(KOr.takeError());
    return nullptr;
  }
  K = *KOr;
  return kernel(K, Err);
}

bool CollectiveRankImpl::setUpKernelLaunch(const MultiTemplateBufferNode &N,
                                           const Workload &W, const Choice &C,
                                           CollectiveAlgo A, bool Fused,
                                           CollectiveLaunch &L,
                                           std::string &Err) {
  if (Fused) {
    const Value *BiasV = nullptr, *ResV = nullptr, *GammaV = nullptr;
    llvm::Expected<CollectiveEpilogue> EOr =
        collectiveEpilogueOf(N, BiasV, ResV, GammaV);
    if (!EOr) {
      Err = llvm::toString(EOr.takeError());
      return false;
    }
    L.Epi = *EOr;
  }
  if (!PeerError.empty()) {
    Err = PeerError;
    return false;
  }
  if (L.Epi.WriteSum && B.Sum.empty()) {
    Err = "no buffer for the epilogue's second output";
    return false;
  }
  if (B.Ragged) {
    Err = "'" + C.Name +
          "' splits evenly; an uneven all_to_all runs on nccl only";
    return false;
  }
  CollectiveKernel K;
  CUfunction F = collectiveKernel(W.Collective, A, B.InElems, L.Epi, K, Err);
  if (!F)
    return false;
  L.Launch = [this, F, K](int Cp) {
    MtPtrs In = B.PeerIn[size_t(Cp)], Out = B.PeerOut[size_t(Cp)],
           Fl = PeerFlags, Sums = B.PeerSum[size_t(Cp)];
    unsigned Rank = unsigned(Comm.rank());
    CUdeviceptr Bi = B.Bias, Re = B.Res, Ga = B.Gamma;
    void *Args[] = {&In, &Out, &Fl, &Rank, &Bi, &Re, &Ga, &Sums};
    return D->cuLaunchKernel(F, K.GridX, 1, 1, K.BlockX, 1, 1, 0, Stream, Args,
                             nullptr);
  };
  return true;
}

std::optional<Measurement>
CollectiveRankImpl::checkLaunch(const Workload &W, bool Fused,
                                const CollectiveLaunch &L) {
  // Correctness on every rank.
  llvm::TimeTraceScope Phase("cuda.check");
  auto Sync = [&] { return syncStream(*D, Stream, "a collective choice"); };
  std::string Why;
  bool SumOut = Fused && L.Epi.WriteSum;
  bool Ok = !D->cuMemsetD8Async(B.Out[0], 0xff,
                                size_t(B.OutElems) * dtypeBytes(B.T), Stream) &&
            (!SumOut || !D->cuMemsetD8Async(B.Sum[0], 0xff,
                                            size_t(B.InElems) * dtypeBytes(B.T),
                                            Stream)) &&
            !Sync() && Comm.barrier(Opts.ChoiceTimeout) == CommStatus::Ok;
  CUresult LR = Ok ? L.Launch(0) : CUDA_SUCCESS;
  CUresult SR = Ok ? Sync() : CUDA_SUCCESS;
  // The peer (two_shot, all-gather) may still be writing into our output
  // until its kernel ended: meet before reading.
  Ok = Ok && !LR && !SR && Comm.barrier(Opts.ChoiceTimeout) == CommStatus::Ok;
  bool Right = false;
  if (Ok) {
    std::string Bytes(size_t(B.OutElems) * dtypeBytes(B.T), '\0');
    Ok = !D->cuMemcpyDtoH(&Bytes[0], B.Out[0], Bytes.size());
    Right = Ok && check(Bytes, W, Fused, L.Epi, Why);
    if (Right && SumOut) {
      std::string Sums(size_t(B.InElems) * dtypeBytes(B.T), '\0');
      Right = !D->cuMemcpyDtoH(&Sums[0], B.Sum[0], Sums.size()) &&
              checkSum(Sums, L.Epi, Why);
    }
  } else {
    Why = "the check run failed: " + D->errorString(LR ? LR : SR);
  }
  if (!agree(Right))
    return failed(Ok ? ChoiceStatus::WrongResult : ChoiceStatus::Failed,
                  Why.empty() ? "a peer rank's output was wrong" : Why);
  return std::nullopt;
}

Measurement
CollectiveRankImpl::timeLaunch(const std::function<CUresult(int)> &Launch) {
  llvm::TimeTraceScope Phase("cuda.time");
  // Warm-up and the launches per sample (the same on every rank). Ms is
  // the last elapsed time read, kept where a later read fails.
  float Ms = 0;
  double EstUs = estimateLaunchUs(Launch, Ms);
  if (!std::isfinite(EstUs))
    return failed(ChoiceStatus::Failed, "a timing run failed");
  int PerSample = int(std::min(500.0, std::max(5.0, std::ceil(1000 / EstUs))));
  double Budget = EstUs * PerSample * Opts.BenchRuns / 1000;
  if (Budget > double(Opts.ChoiceTimeout.count()))
    return failed(ChoiceStatus::Timeout, "would run " +
                                             std::to_string(int(Budget)) +
                                             " ms, past the choice timeout");
  // Each sample replays the PerSample launches captured in a CUDA graph
  // (device time without host dispatch), after a barrier; where capture
  // fails on any rank, every rank launches eagerly instead.
  CUgraph Graph = nullptr;
  CUgraphExec Exec = nullptr;
  bool Captured = agree(captureLaunches(Launch, PerSample, Graph, Exec));
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
      return failed(ChoiceStatus::Failed, "a peer stopped answering");
    }
    D->cuEventRecord(E0, Stream);
    if (Captured)
      D->cuGraphLaunch(Exec, Stream);
    else
      for (int I = 0; I < PerSample; ++I)
        Launch(
            int((S * unsigned(PerSample) + unsigned(I)) % unsigned(B.Copies)));
    D->cuEventRecord(E1, Stream);
    if (CUresult R = syncEvent(*D, E1, "a collective choice")) {
      Cleanup();
      return failed(ChoiceStatus::Failed,
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
  if (B.Ragged)
    M.Message = "timed eagerly: the counts are read on the host each call";
  else if (!Captured)
    M.Message = "timed without a CUDA graph (capture failed)";
  return M;
}

double
CollectiveRankImpl::estimateLaunchUs(const std::function<CUresult(int)> &Launch,
                                     float &Ms) {
  for (unsigned I = 0; I < std::max(2u, Opts.WarmupRuns); ++I)
    Launch(int(I % unsigned(B.Copies)));
  syncStream(*D, Stream, "a collective choice");
  Comm.barrier(Opts.ChoiceTimeout);
  D->cuEventRecord(E0, Stream);
  for (int I = 0; I < 5; ++I)
    Launch(I % B.Copies);
  D->cuEventRecord(E1, Stream);
  bool TOk = !syncEvent(*D, E1, "a collective choice");
  D->cuEventElapsedTime(&Ms, E0, E1);
  // The slowest rank's estimate, on every rank; +inf if any failed.
  std::vector<double> Est{TOk ? std::max(0.5, double(Ms) * 1000 / 5) : Inf};
  if (Comm.allReduceMax(Est, Opts.ChoiceTimeout) != CommStatus::Ok)
    return Inf;
  return Est[0];
}

bool CollectiveRankImpl::captureLaunches(
    const std::function<CUresult(int)> &Launch, int PerSample, CUgraph &Graph,
    CUgraphExec &Exec) {
  // An uneven all_to_all reads its counts on the host each call, which a
  // CUDA graph cannot hold: it is timed eagerly.
  if (B.Ragged || !D->cuStreamBeginCapture || !D->cuGraphLaunch ||
      D->cuStreamBeginCapture(Stream, CU_STREAM_CAPTURE_MODE_RELAXED))
    return false;
  bool LOk = true;
  for (int I = 0; I < PerSample; ++I)
    LOk &= !Launch(I % B.Copies);
  CUresult ER = D->cuStreamEndCapture(Stream, &Graph);
  return LOk && !ER && Graph &&
         !D->cuGraphInstantiateWithFlags(&Exec, Graph, 0);
}

std::unique_ptr<CollectiveRank>
mtsched::createCollectiveRank(const AutotuneOptions &Opts, Communicator &Comm,
                              KernelStats &Stats) {
  return std::make_unique<CollectiveRankImpl>(Opts, Comm, Stats);
}
