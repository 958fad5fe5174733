//===- CudaCollectiveImpl.h - One rank's collectives (internal) -*- C++ -*-===//
//
// Internal to lib/Backend/Cuda: the state of one rank's multi-GPU
// collectives, shared by CudaCollective.cpp (set-up and timing) and
// CudaCollectiveCheck.cpp (inputs and the correctness check).
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_LIB_BACKEND_CUDA_CUDACOLLECTIVEIMPL_H
#define MTSCHED_LIB_BACKEND_CUDA_CUDACOLLECTIVEIMPL_H

#include "CudaCollective.h"
#include "mtsched/Backend/Cuda/CollectiveCodegen.h"
#include "mtsched/Backend/Cuda/CudaApi.h"
#include "mtsched/Backend/Cuda/CudaBenchSupport.h"
#include "mtsched/Backend/Cuda/NcclApi.h"
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mtsched {
namespace cuda {

/// Rows rank r sends rank p in an uneven all_to_all's timing, at [r * Ranks
/// + p]: Per * (1 + 2 * ((r + p) mod Ranks)) / Ranks with Per = min(Rows,
/// Capacity) / Ranks, so no rank sends more than Rows or receives more than
/// Capacity, and counts differ up to (2 Ranks - 1)-fold.
std::vector<int64_t> raggedCounts(int64_t Rows, int64_t Capacity, int Ranks);

/// A seeded stream's elements as a collective's check reads them: floats
/// as randomValues() draws them (what BenchSupport::fill writes on the
/// GPU), integers in [-1000, 1000) (all_to_all of counts and indices, where
/// -1, 0 and 1 would hide a misplaced row).
struct DrawnStream {
  uint64_t Key = 0;
  DType T = DType::F32;
  float at(int64_t I) const;
};

struct MtPtrs {
  CUdeviceptr P[MaxCollectiveRanks];
};

class CollectiveRankImpl : public CollectiveRank {
public:
  CollectiveRankImpl(const AutotuneOptions &Opts, Communicator &Comm,
                     KernelStats &Stats)
      : Opts(Opts), Comm(Comm), Stats(Stats) {}
  ~CollectiveRankImpl() override;
  Measurement measure(const MultiTemplateBufferNode &N, const Workload &W,
                      const Choice &C, bool Fused,
                      const std::string &LocalFault) override;
  void startSetUp() override { startNccl(); }

private:
  struct Buffers {
    std::string Key;
    int64_t InElems = 0, OutElems = 0, Cols = 0;
    DType T = DType::BF16;
    int Copies = 1;
    /// One allocation holding every copy's In, Out and Sum.
    CUdeviceptr Arena = 0;
    std::vector<CUdeviceptr> In, Out;    // own, per copy (in Arena)
    std::vector<MtPtrs> PeerIn, PeerOut; // per copy
    /// The second output of an all_reduce whose epilogue `writes` its sum
    /// (own and peers', per copy); empty otherwise.
    std::vector<CUdeviceptr> Sum;
    std::vector<MtPtrs> PeerSum;
    std::vector<CUdeviceptr> Imported; // peers' memory opened by IPC
    CUdeviceptr Bias = 0, Res = 0, Gamma = 0;
    /// An uneven all_to_all: rows of RowElems elements, Counts[r * N + p]
    /// the rows rank r sends rank p (raggedCounts), and this rank's send
    /// then receive counts on the device (2N i64), read back by each call
    /// as a compiled graph would.
    bool Ragged = false;
    int64_t RowElems = 0;
    std::vector<int64_t> Counts;
    CUdeviceptr CountsDev = 0;
    /// Every rank's input and the residual, drawn by the check element by
    /// element: it samples a large collective's output (every 8th element
    /// of 16M), and drawing each rank's input whole took most of a node's
    /// set-up. The row-long bias and RMSNorm weights are stored.
    std::vector<DrawnStream> HostIn;
    DrawnStream HostRes;
    std::vector<float> HostBias, HostGamma;
  };

  /// Device, streams, peer access, NCCL, flags; Err says why not.
  bool init(std::string &Err);
  /// Once: NCCL's id from rank 0 (agreed and broadcast), then
  /// ncclCommInitRank on a thread of its own, so that the context and
  /// NCCL's kernels load while the caller goes on.
  void startNccl();
  /// Waits for startNccl's communicator, at most the choice timeout, and
  /// agrees whether every rank has one; sets NComm, or NcclError.
  void finishNccl();
  /// A communicator started early that no measurement took: its thread is
  /// waited for (unless finishNccl gave up on it), its result destroyed.
  void releaseNccl();
  bool prepare(const MultiTemplateBufferNode &N, const Workload &W,
               std::string &Err);

  // measure()'s steps. Each set-up step stops at the first reason the
  // choice cannot run (Err); measure() then agrees with the peers before
  // anything is launched.

  /// What setting up one choice produced: the launch of input copy Cp, and
  /// the epilogue it runs fused.
  struct CollectiveLaunch {
    std::function<CUresult(int)> Launch;
    CollectiveEpilogue Epi;
  };
  /// Checks the algorithm and the reduction, prepares the buffers
  /// (collective: the caller runs it on every rank that got this far) and
  /// sets up the NCCL call or the peer-memory kernel.
  bool setUpLaunch(const MultiTemplateBufferNode &N, const Workload &W,
                   const Choice &C, bool Fused, CollectiveLaunch &L,
                   std::string &Err);
  bool setUpNcclLaunch(const Workload &W, bool Fused, CollectiveLaunch &L,
                       std::string &Err);

  // The hierarchical collective (CudaHier.cpp): NCCL inside each host and
  // across hosts, on two sub-communicators made once.

  /// Once, on every rank (a faulty one too: it is an exchange): groups
  /// Comm's ranks by Opts.HostName, makes NCCL's intra-host and inter-host
  /// communicators (one ncclUniqueId each) and agrees that every rank has
  /// both; HierError says why not.
  void setUpHier();
  bool setUpHierLaunch(const MultiTemplateBufferNode &N, const Workload &W,
                       bool Fused, CollectiveLaunch &L, std::string &Err);
  /// The fused all_reduce: reduce_scatter inside, all_reduce across, the
  /// epilogue kernel on the shard (L.Epi), all_gather inside (of the sum
  /// too where the epilogue writes one). DT is NCCL's dtype.
  bool setUpHierFusedLaunch(int DT, size_t Shard, CollectiveLaunch &L,
                            std::string &Err);
  /// Destroys the sub-communicators and the scratch buffer.
  void releaseHier();
  /// The GPU this rank's collectives run on, and how many GPUs this process
  /// needs to see: thread ranks take GPU rank (of Ranks), an MPI process its
  /// index among its host's processes.
  int gpuOrdinal(int Count) const;
  int gpusNeeded() const;
  std::function<CUresult(int)> evenAllToAllLaunch();
  std::function<CUresult(int)> raggedAllToAllLaunch();
  bool setUpKernelLaunch(const MultiTemplateBufferNode &N, const Workload &W,
                         const Choice &C, CollectiveAlgo A, bool Fused,
                         CollectiveLaunch &L, std::string &Err);
  /// One launch checked on every rank; the agreed failure, or none.
  std::optional<Measurement> checkLaunch(const Workload &W, bool Fused,
                                         const CollectiveLaunch &L);
  /// Warm-up, the agreed launches per sample, then the samples' median.
  Measurement timeLaunch(const std::function<CUresult(int)> &Launch);
  /// Warm-up, then five launches timed: the slowest rank's microseconds a
  /// launch (+inf if any rank failed). Ms: the elapsed time read.
  double estimateLaunchUs(const std::function<CUresult(int)> &Launch,
                          float &Ms);
  /// This rank's PerSample launches captured in a CUDA graph (Graph, Exec);
  /// false where it cannot (not agreed: the caller agrees).
  bool captureLaunches(const std::function<CUresult(int)> &Launch,
                       int PerSample, CUgraph &Graph, CUgraphExec &Exec);
  /// prepare()'s upload of stream Stream's first Count values to P, or of
  /// Stored's where given.
  using UploadFn =
      std::function<bool(CUdeviceptr P, int64_t Count, uint64_t Stream,
                         const std::vector<float> *Stored)>;
  /// An uneven all_to_all's send and receive counts of this rank, on the
  /// device (B.CountsDev).
  bool uploadRaggedCounts();
  /// An all_reduce's epilogue operands, the same on every rank (replicated
  /// tensors): a bias and RMSNorm weights Cols long, a residual of the
  /// input's size; B.T and B.InElems are set.
  bool uploadEpilogueOperands(int64_t Cols, const UploadFn &Upload);
  /// Every copy's input, output and sum on every rank, from each rank's
  /// arena (All[rank][0]) laid out as this rank's.
  void setPeerPointers(const std::vector<std::vector<CUdeviceptr>> &All,
                       size_t Stride, size_t InA, size_t OutA, bool WantSum);
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
  /// Generates and loads the collective kernel of kind Kind, algorithm A
  /// over Elems elements with epilogue Epi on this rank's buffers and
  /// device into K; null with Err set when it cannot.
  CUfunction collectiveKernel(CollectiveKind Kind, CollectiveAlgo A,
                              int64_t Elems, const CollectiveEpilogue &Epi,
                              CollectiveKernel &K, std::string &Err);
  /// The fill kernels on this rank's GPU, loaded on first use; null (said
  /// once on stderr) if they cannot load, and inputs come from the host.
  BenchSupport *support();
  bool check(const std::string &Bytes, const Workload &W, bool Fused,
             const CollectiveEpilogue &E, std::string &Msg);
  /// Checks the second output: the sum after the epilogue's adds.
  bool checkSum(const std::string &Bytes, const CollectiveEpilogue &E,
                std::string &Msg);

  const AutotuneOptions &Opts;
  Communicator &Comm;
  KernelStats &Stats;
  bool Inited = false, InitOk = false;
  std::string InitError, PeerError;
  DeviceInfo Dev;
  const DriverApi *D = nullptr;
  const nccl::NcclApi *Nc = nullptr;
  std::string NcclError;
  nccl::ncclComm_t NComm = nullptr;
  /// What startNccl's thread hands over; shared, since a thread that never
  /// returns (a peer that vanished) is left behind.
  struct NcclStart;
  std::shared_ptr<NcclStart> NcclInit;
  bool NcclStarted = false;
  /// The hierarchical collective's state (setUpHier): this rank's host
  /// index and index inside it, of Hosts hosts of PerHost ranks; whether
  /// group rank order is host-major (all_gather and reduce_scatter need it).
  bool HierTried = false;
  std::string HierError;
  nccl::ncclComm_t IntraComm = nullptr, InterComm = nullptr;
  int HierHost = 0, HierLocal = 0, HierHosts = 0, HierPerHost = 0;
  bool HierHostMajor = false;
  CUdeviceptr HierScratch = 0;
  size_t HierScratchBytes = 0;
  CUstream Stream = nullptr;
  CUevent E0 = nullptr, E1 = nullptr;
  CUdeviceptr Flags = 0;
  MtPtrs PeerFlags{};
  std::vector<CUdeviceptr> ImportedFlags;
  Buffers B;
  std::map<std::string, CUfunction> Kernels;
  std::vector<CUmodule> Modules;
  std::unique_ptr<BenchSupport> Support;
  bool SupportTried = false;
};

} // namespace cuda
} // namespace mtsched

#endif // MTSCHED_LIB_BACKEND_CUDA_CUDACOLLECTIVEIMPL_H
