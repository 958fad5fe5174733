//===- RooflineCollectives.cpp - Roofline times of collectives ------------===//
//
// NCCL, the symmetric-memory one-shot/two-shot kernels, direct peer copies
// and the hierarchical (intra-host + network) algorithm, and the names of
// the algorithms. Formulas in docs/SIMULATOR.md; the constants are in
// RooflineImpl.h.
//
//===----------------------------------------------------------------------===//
#include "RooflineImpl.h"
#include "mtsched/Runtime/Roofline.h"
#include "llvm/ADT/StringSwitch.h"
#include <algorithm>
#include <cmath>
#include <limits>

using namespace mtsched;
using namespace mtsched::roofline;

llvm::StringRef mtsched::collectiveAlgoName(CollectiveAlgo A) {
  switch (A) {
  case CollectiveAlgo::Nccl:
    return "nccl";
  case CollectiveAlgo::OneShot:
    return "one_shot";
  case CollectiveAlgo::TwoShot:
    return "two_shot";
  case CollectiveAlgo::P2P:
    return "p2p";
  case CollectiveAlgo::Hier:
    return "hier";
  }
  return "nccl";
}

std::optional<CollectiveAlgo>
mtsched::parseCollectiveAlgo(llvm::StringRef Name) {
  return llvm::StringSwitch<std::optional<CollectiveAlgo>>(Name)
      .Case("nccl", CollectiveAlgo::Nccl)
      .Case("one_shot", CollectiveAlgo::OneShot)
      .Case("two_shot", CollectiveAlgo::TwoShot)
      .Case("p2p", CollectiveAlgo::P2P)
      .Cases("hier", "hierarchical", CollectiveAlgo::Hier)
      .Default(std::nullopt);
}

bool mtsched::collectiveAlgoSupports(CollectiveAlgo Algo, CollectiveKind Kind) {
  bool Known =
      Kind == CollectiveKind::AllReduce || Kind == CollectiveKind::AllGather ||
      Kind == CollectiveKind::ReduceScatter || Kind == CollectiveKind::AllToAll;
  if (!Known)
    return false;
  switch (Algo) {
  case CollectiveAlgo::Nccl:
    return true;
  case CollectiveAlgo::OneShot:
  case CollectiveAlgo::TwoShot:
    return Kind == CollectiveKind::AllReduce;
  case CollectiveAlgo::P2P:
    return Kind != CollectiveKind::AllReduce;
  case CollectiveAlgo::Hier:
    return Kind != CollectiveKind::AllToAll;
  }
  return false;
}

namespace {

/// NCCL: a ring (all_to_all: one round of grouped sends) under the fastest
/// protocol. Steps and StepBytes are per rank.
double ncclUs(const DeviceDesc &D, double Steps, double LinkBytes) {
  double Best = Inf;
  for (const NcclProtocol &P : {NcclLL, NcclSimple}) {
    double Us = P.BaseUs + Steps * P.StepLatencyLinks * D.LinkLatencyUs +
                linkUs(D, LinkBytes, P.LinkEfficiency);
    Best = std::min(Best, Us);
  }
  return D.LaunchUs + Best;
}

} // namespace

double mtsched::collectiveTimeUs(const DeviceDesc &D, CollectiveKind Kind,
                                 CollectiveAlgo Algo, int64_t Bytes, int Ranks,
                                 const EpilogueDesc &Fused) {
  if (Ranks < 1 || Bytes < 0 || !collectiveAlgoSupports(Algo, Kind))
    return Inf;
  bool HasEpilogue = Fused.NumOps > 0;
  // NCCL's kernels are closed: nothing can be appended to them.
  if (HasEpilogue && Algo == CollectiveAlgo::Nccl)
    return Inf;
  double EpiUs = fusedEpilogueUs(D, Fused);
  double B = double(Bytes);
  // One rank: every collective is a copy of the input to the output.
  if (Ranks == 1)
    return pointwiseTimeUs(D, Bytes, Bytes, 0) + EpiUs;

  double N = Ranks;
  switch (Algo) {
  case CollectiveAlgo::Nccl:
    switch (Kind) {
    case CollectiveKind::AllReduce:
      // Ring reduce-scatter then all-gather: 2(n-1) steps of Bytes/n.
      return ncclUs(D, 2 * (N - 1), 2 * (N - 1) * B / N);
    case CollectiveKind::AllGather:
      // n-1 steps, each forwarding one rank's shard.
      return ncclUs(D, N - 1, (N - 1) * B);
    case CollectiveKind::ReduceScatter:
      // n-1 steps of Bytes/n.
      return ncclUs(D, N - 1, (N - 1) * B / N);
    case CollectiveKind::AllToAll:
      // One round of grouped sends: (n-1)/n of the input leaves each rank.
      return ncclUs(D, 1, (N - 1) * B / N);
    default:
      return Inf;
    }

  case CollectiveAlgo::OneShot:
    // One barrier (are all peers' inputs ready?), then every rank loads all
    // n-1 peers' full buffers over the link and reduces them with its own
    // input: reads Bytes and writes Bytes of HBM.
    return D.LaunchUs + D.BarrierUs + D.LinkLatencyUs +
           linkUs(D, (N - 1) * B, OneShotLinkEfficiency) + hbmUs(D, 2 * B) +
           EpiUs;

  case CollectiveAlgo::TwoShot: {
    // Phase 1 reduce-scatter: each rank loads its 1/n chunk from the n-1
    // peers and reduces it; phase 2 all-gather: it loads the peers' reduced
    // chunks. A barrier precedes each phase; the second finds the ranks
    // already aligned, so it costs one link latency rather than BarrierUs.
    // HBM: read the own chunk, write it, write the n-1 gathered chunks. An
    // epilogue runs on the own chunk only, before it is gathered.
    double Fixed = D.LaunchUs + D.BarrierUs + 3 * D.LinkLatencyUs;
    return Fixed + linkUs(D, 2 * (N - 1) * B / N, TwoShotLinkEfficiency) +
           hbmUs(D, (N + 1) * B / N) + EpiUs / N;
  }

  case CollectiveAlgo::P2P: {
    // Direct peer copies after one barrier.
    double Fixed = D.LaunchUs + D.BarrierUs + D.LinkLatencyUs;
    double LinkBytes = 0, HbmBytes = 0;
    switch (Kind) {
    case CollectiveKind::AllGather:
      // Write the own shard to n-1 peers; n shards land in the output.
      LinkBytes = (N - 1) * B;
      HbmBytes = B + N * B;
      break;
    case CollectiveKind::ReduceScatter:
      // Load the own 1/n chunk from n-1 peers, reduce with the local one.
      LinkBytes = (N - 1) * B / N;
      HbmBytes = 2 * B / N;
      break;
    case CollectiveKind::AllToAll:
      // Send (n-1)/n of the input; read it all, write it all.
      LinkBytes = (N - 1) * B / N;
      HbmBytes = 2 * B;
      break;
    default:
      return Inf;
    }
    return Fixed + linkUs(D, LinkBytes, P2PLinkEfficiency) +
           hbmUs(D, HbmBytes) + EpiUs;
  }

  case CollectiveAlgo::Hier:
    // The shape of the group is not in Ranks: hierCollectiveTimeUs.
    return Inf;
  }
  return Inf;
}

namespace {

/// A peer-memory step inside one host of P ranks (one barrier, then peer
/// copies): LinkBytes leave each rank, HbmBytes are read and written.
double intraHostUs(const DeviceDesc &D, int P, double LinkBytes,
                   double HbmBytes) {
  if (P <= 1)
    return 0;
  return D.LaunchUs + D.BarrierUs + D.LinkLatencyUs +
         linkUs(D, LinkBytes, P2PLinkEfficiency) + hbmUs(D, HbmBytes);
}

/// A ring across H hosts over the network: Steps messages, NetBytes leaving
/// each rank in all.
double interHostUs(const DeviceDesc &D, int H, double Steps, double NetBytes) {
  if (H <= 1)
    return 0;
  return D.LaunchUs + Steps * D.NetLatencyUs +
         NetBytes / (bytesPerUs(D.NetGBps) * NetLinkEfficiency);
}

} // namespace

double mtsched::hierCollectiveTimeUs(const DeviceDesc &D, CollectiveKind Kind,
                                     int64_t Bytes, int Hosts, int PerHost,
                                     const EpilogueDesc &Fused) {
  if (Hosts < 1 || PerHost < 1 || Bytes < 0 ||
      !collectiveAlgoSupports(CollectiveAlgo::Hier, Kind))
    return Inf;
  bool HasEpilogue = Fused.NumOps > 0;
  double B = double(Bytes), H = Hosts, P = PerHost;
  switch (Kind) {
  case CollectiveKind::AllReduce: {
    // Reduce-scatter inside: each rank ends with B/P reduced over its host.
    double Shard = B / P;
    double Us = intraHostUs(D, PerHost, (P - 1) * Shard, 2 * Shard);
    // All-reduce of the shard across hosts (ring: 2(H-1) steps of 1/H).
    Us += interHostUs(D, Hosts, 2 * (H - 1), 2 * (H - 1) * Shard / H);
    // All-gather inside.
    double Gather = intraHostUs(D, PerHost, (P - 1) * Shard, Shard + B);
    Us += Gather;
    if (!HasEpilogue)
      return Us;
    // Fused: the steps are NCCL calls, so the epilogue is a kernel of its
    // own on the rank's shard (1/P of the rows, and of the residual it
    // reads; the row-long bias and weights are small beside it) before the
    // gather; a second output (`writes`) is gathered too, in the same NCCL
    // group: its bytes, not another launch and barrier.
    EpilogueDesc OnShard = Fused;
    OnShard.Elements = Fused.Elements / PerHost;
    OnShard.ExtraInputBytes = Fused.ExtraInputBytes / PerHost;
    double GatherBytesUs = PerHost > 1
                               ? linkUs(D, (P - 1) * Shard, P2PLinkEfficiency) +
                                     hbmUs(D, Shard + B)
                               : 0;
    return Us + epilogueTimeUs(D, OnShard) + Fused.ExtraWrites * GatherBytesUs;
  }
  case CollectiveKind::AllGather:
    // Across hosts among the ranks of one local index (H-1 shards each),
    // then inside each host the H shards gathered so far. Both steps are
    // NCCL calls: no epilogue fuses.
    if (HasEpilogue)
      return Inf;
    return interHostUs(D, Hosts, H - 1, (H - 1) * B) +
           intraHostUs(D, PerHost, (P - 1) * H * B, H * B + H * P * B);
  case CollectiveKind::ReduceScatter: {
    // Reduce-scatter inside, then across hosts on the host's 1/P; NCCL
    // calls, so no epilogue fuses.
    if (HasEpilogue)
      return Inf;
    double Shard = B / P;
    return intraHostUs(D, PerHost, (P - 1) * Shard, 2 * Shard) +
           interHostUs(D, Hosts, H - 1, (H - 1) * Shard / H);
  }
  default:
    return Inf;
  }
}

std::optional<CollectiveAlgo> mtsched::collectiveAlgoOf(llvm::StringRef Name) {
  std::string Lower = Name.lower();
  llvm::StringRef L(Lower);
  if (L.contains("nccl"))
    return CollectiveAlgo::Nccl;
  if (L.contains("one_shot") || L.contains("oneshot"))
    return CollectiveAlgo::OneShot;
  if (L.contains("two_shot") || L.contains("twoshot"))
    return CollectiveAlgo::TwoShot;
  if (L.contains("p2p"))
    return CollectiveAlgo::P2P;
  if (L.contains("hier"))
    return CollectiveAlgo::Hier;
  return std::nullopt;
}
