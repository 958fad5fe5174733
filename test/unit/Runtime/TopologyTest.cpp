#include "mtsched/Runtime/Topology.h"
#include "mtsched/Runtime/DeviceDesc.h"
#include "mtsched/Runtime/Roofline.h"
#include "gtest/gtest.h"
#include <cmath>

using namespace mtsched;

namespace {

Topology parse(llvm::StringRef Text) {
  llvm::Expected<Topology> T = parseTopologyJSON(Text, "FILE");
  EXPECT_TRUE(bool(T)) << (T ? "" : llvm::toString(T.takeError()));
  return T ? std::move(*T) : Topology();
}

std::string errorFor(llvm::StringRef Text) {
  llvm::Expected<Topology> T = parseTopologyJSON(Text, "FILE");
  if (T)
    return "(parsed)";
  return llvm::toString(T.takeError());
}

constexpr llvm::StringLiteral TwoHosts = R"({"hosts": [
  {"name": "a", "ranks": [0, 1, 2, 3], "nvlink_domains": [[0, 1], [2, 3]]},
  {"name": "b", "ranks": [4, 5, 6, 7]}
]})";

} // namespace

TEST(TopologyTest, ParsesHostsAndDomains) {
  Topology T = parse(TwoHosts);
  ASSERT_EQ(T.Hosts.size(), 2u);
  EXPECT_EQ(T.Hosts[0].Name, "a");
  EXPECT_EQ(T.Hosts[0].Domains.size(), 2u);
  // A host without nvlink_domains is one domain of all its ranks.
  ASSERT_EQ(T.Hosts[1].Domains.size(), 1u);
  EXPECT_EQ(T.Hosts[1].Domains[0], (std::vector<int64_t>{4, 5, 6, 7}));
  EXPECT_FALSE(T.isDefault());
  EXPECT_FALSE(bool(T.checkWorld(8, "FILE")));
  EXPECT_EQ(T.fingerprint(), "a:[0,1,2,3]{[0,1],[2,3]};b:[4,5,6,7]{[4,5,6,7]}");
}

TEST(TopologyTest, SpanOfGroups) {
  Topology T = parse(TwoHosts);
  Topology::Span OneDomain = T.spanOf({0, 1});
  EXPECT_EQ(OneDomain.Hosts, 1);
  EXPECT_EQ(OneDomain.Domains, 1);
  Topology::Span TwoDomains = T.spanOf({1, 2});
  EXPECT_EQ(TwoDomains.Hosts, 1);
  EXPECT_EQ(TwoDomains.Domains, 2);
  Topology::Span Both = T.spanOf({0, 1, 2, 4});
  EXPECT_EQ(Both.Hosts, 2);
  EXPECT_EQ(Both.Domains, 3);
  EXPECT_EQ(Both.MaxPerHost, 3);
  // The default: one host, one domain, whatever the ranks.
  Topology::Span Default = Topology().spanOf({0, 5, 9});
  EXPECT_EQ(Default.Hosts, 1);
  EXPECT_EQ(Default.Domains, 1);
  EXPECT_EQ(Default.MaxPerHost, 3);
  EXPECT_EQ(Topology().fingerprint(), "default");
}

TEST(TopologyTest, WorldMustMatch) {
  Topology T = parse(TwoHosts);
  EXPECT_EQ(llvm::toString(T.checkWorld(4, "FILE")),
            "FILE: host 'b' lists rank 4, but there are 4 ranks");
  EXPECT_EQ(llvm::toString(T.checkWorld(9, "FILE")),
            "FILE: lists 8 of the 9 ranks: every rank must be on a host");
  EXPECT_FALSE(bool(Topology().checkWorld(1000, "FILE")));
}

TEST(TopologyTest, Errors) {
  EXPECT_EQ(errorFor("{\"hosts\": [\n  {\"ranks\": [0,]}\n]}"),
            "FILE:2:16: invalid JSON: Invalid JSON value");
  EXPECT_EQ(errorFor("[]"), "FILE: a topology file must hold a JSON object");
  EXPECT_EQ(errorFor("{}"), "FILE: key 'hosts' must be an array of hosts");
  EXPECT_EQ(errorFor(R"({"hosts": []})"),
            "FILE: key 'hosts' must list at least one host");
  EXPECT_EQ(errorFor(R"({"hosts": [3]})"),
            "FILE: hosts[0]: a host must be a JSON object");
  EXPECT_EQ(errorFor(R"({"hosts": [{"ranks": [0], "gpus": 8}]})"),
            "FILE: hosts[0]: unknown key 'gpus'");
  EXPECT_EQ(errorFor(R"({"hosts": [{"ranks": []}]})"),
            "FILE: hosts[0].ranks: must not be empty");
  EXPECT_EQ(errorFor(R"({"hosts": [{"ranks": [0.5]}]})"),
            "FILE: hosts[0].ranks[0]: a rank must be an integer in [0, "
            "16777216]");
  EXPECT_EQ(errorFor(R"({"hosts": [{"ranks": [0]}, {"ranks": [1, 0]}]})"),
            "FILE: hosts[1].ranks[1]: rank 0 is already listed at "
            "hosts[0].ranks[0]");
  EXPECT_EQ(errorFor(R"({"hosts": [{"name": "a", "ranks": [0]},
                                    {"name": "a", "ranks": [1]}]})"),
            "FILE: hosts[1].name: host 'a' is listed twice");
  EXPECT_EQ(errorFor(R"({"hosts": [{"ranks": [0, 1],
                                    "nvlink_domains": [[0], [0, 1]]}]})"),
            "FILE: hosts[0].nvlink_domains[1][0]: rank 0 is in two NVLink "
            "domains");
  EXPECT_EQ(errorFor(R"({"hosts": [{"ranks": [0, 1],
                                    "nvlink_domains": [[0, 2]]}]})"),
            "FILE: hosts[0].nvlink_domains[0][1]: rank 2 is not one of the "
            "host's ranks");
}

TEST(TopologyTest, HierarchicalCollectiveCost) {
  DeviceDesc D;
  EpilogueDesc None;
  None.Dtype = DType::BF16;
  // 256 MB over 2 hosts of 4: the hierarchical all_reduce sends 1/4 of the
  // message across the network, a flat ring over the network all of it.
  int64_t B = int64_t(256) << 20;
  double Hier =
      hierCollectiveTimeUs(D, CollectiveKind::AllReduce, B, 2, 4, None);
  DeviceDesc Net = D;
  Net.LinkGBps = D.NetGBps;
  Net.LinkLatencyUs = D.NetLatencyUs;
  double Flat = collectiveTimeUs(Net, CollectiveKind::AllReduce,
                                 CollectiveAlgo::Nccl, B, 8, None);
  EXPECT_TRUE(std::isfinite(Hier));
  EXPECT_LT(Hier, Flat);
  // Slower than one NVLink domain of 8 could do it.
  EXPECT_GT(Hier, collectiveTimeUs(D, CollectiveKind::AllReduce,
                                   CollectiveAlgo::Nccl, B, 8, None));
  // A faster network makes it faster.
  DeviceDesc Fast = D;
  Fast.NetGBps = 4 * D.NetGBps;
  EXPECT_LT(
      hierCollectiveTimeUs(Fast, CollectiveKind::AllReduce, B, 2, 4, None),
      Hier);
  EXPECT_TRUE(std::isfinite(
      hierCollectiveTimeUs(D, CollectiveKind::AllGather, B, 2, 4, None)));
  EXPECT_TRUE(std::isfinite(
      hierCollectiveTimeUs(D, CollectiveKind::ReduceScatter, B, 2, 4, None)));
  EXPECT_TRUE(std::isinf(
      hierCollectiveTimeUs(D, CollectiveKind::AllToAll, B, 2, 4, None)));
  EXPECT_TRUE(std::isinf(
      hierCollectiveTimeUs(D, CollectiveKind::AllReduce, B, 0, 4, None)));
  EXPECT_EQ(parseCollectiveAlgo("hier"), CollectiveAlgo::Hier);
  EXPECT_EQ(parseCollectiveAlgo("hierarchical"), CollectiveAlgo::Hier);
}

TEST(TopologyTest, FusedHierarchicalAllReduceRunsTheEpilogueOnTheShard) {
  DeviceDesc D;
  EpilogueDesc None;
  None.Dtype = DType::BF16;
  // A residual add and RMSNorm over 16 MB of bf16 (8M elements).
  int64_t B = int64_t(16) << 20;
  EpilogueDesc Norm;
  Norm.Dtype = DType::BF16;
  Norm.Elements = B / 2;
  Norm.ExtraInputBytes = B + 2 * 4096;
  Norm.FlopsPerElement = 5;
  Norm.RowReduction = true;
  Norm.NumOps = 2;
  double Unfused =
      hierCollectiveTimeUs(D, CollectiveKind::AllReduce, B, 2, 4, None);
  double Fused =
      hierCollectiveTimeUs(D, CollectiveKind::AllReduce, B, 2, 4, Norm);
  // The epilogue on a quarter of the rows: cheaper than a separate kernel
  // over the whole tensor after the collective, dearer than none.
  EXPECT_GT(Fused, Unfused);
  EXPECT_LT(Fused, Unfused + epilogueTimeUs(D, Norm));
  // Writing the sum too gathers it inside the host as well.
  EpilogueDesc WithSum = Norm;
  WithSum.ExtraWrites = 1;
  EXPECT_GT(
      hierCollectiveTimeUs(D, CollectiveKind::AllReduce, B, 2, 4, WithSum),
      Fused);
  // all_gather and reduce_scatter end in NCCL calls: nothing fuses.
  EXPECT_TRUE(std::isinf(
      hierCollectiveTimeUs(D, CollectiveKind::AllGather, B, 2, 4, Norm)));
  EXPECT_TRUE(std::isinf(
      hierCollectiveTimeUs(D, CollectiveKind::ReduceScatter, B, 2, 4, Norm)));
}

namespace {

RankPlacement placed(llvm::StringRef Host, int64_t Key, int Ordinal = -1,
                     std::vector<int> Peers = {}) {
  RankPlacement P;
  P.Host.Name = Host.str();
  P.Host.Key = Key;
  P.Host.Method = "MPI shared-memory split";
  P.Ordinal = Ordinal;
  P.PeerOrdinals = std::move(Peers);
  if (Ordinal < 0)
    P.NoGpuReason = "no GPU: test";
  return P;
}

} // namespace

TEST(TopologyDiscoveryTest, PlacementRoundTrips) {
  RankPlacement P = placed("node\ta", 4, 1, {0, 1, 3});
  P.NoGpuReason = "line\nbreak";
  RankPlacement Q;
  ASSERT_TRUE(RankPlacement::decode(P.encode(), Q));
  EXPECT_EQ(Q.Host.Name, "node a");
  EXPECT_EQ(Q.Host.Key, 4);
  EXPECT_EQ(Q.Host.Method, "MPI shared-memory split");
  EXPECT_EQ(Q.Ordinal, 1);
  EXPECT_EQ(Q.PeerOrdinals, (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(Q.NoGpuReason, "line break");
  RankPlacement None = placed("h", 0);
  ASSERT_TRUE(RankPlacement::decode(None.encode(), Q));
  EXPECT_EQ(Q.Ordinal, -1);
  EXPECT_TRUE(Q.PeerOrdinals.empty());
  EXPECT_FALSE(RankPlacement::decode("p1\tx", Q));
  EXPECT_FALSE(RankPlacement::decode("p2\t0\th\tm\t-1\t\t", Q));
  EXPECT_FALSE(RankPlacement::decode("p1\t0\th\tm\t-2\t\t", Q));
  EXPECT_FALSE(RankPlacement::decode("p1\t0\th\tm\t0\t1,x\t", Q));
}

TEST(TopologyDiscoveryTest, OneHostOneDomainIsTheDefault) {
  std::vector<RankPlacement> R = {placed("vm", 0), placed("vm", 0)};
  DiscoveredTopology D = topologyFromPlacements(R);
  EXPECT_TRUE(D.Topo.isDefault());
  EXPECT_EQ(D.Source, "discovered: 1 host 'vm' (MPI shared-memory split); "
                      "NVLink domains not probed, one a host (no GPU: test)");
}

TEST(TopologyDiscoveryTest, HostsByKeyInRankOrder) {
  // Ranks interleaved over two hosts (mpirun --map-by node), the second
  // host's key its lowest rank.
  std::vector<RankPlacement> R = {placed("b", 0), placed("a", 1),
                                  placed("b", 0), placed("a", 1)};
  DiscoveredTopology D = topologyFromPlacements(R);
  ASSERT_EQ(D.Topo.Hosts.size(), 2u);
  EXPECT_EQ(D.Topo.Hosts[0].Name, "b");
  EXPECT_EQ(D.Topo.Hosts[0].Ranks, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(D.Topo.Hosts[1].Ranks, (std::vector<int64_t>{1, 3}));
  EXPECT_FALSE(bool(D.Topo.checkWorld(4, "discovered")));
  Topology::Span S = D.Topo.spanOf({0, 1, 2, 3});
  EXPECT_EQ(S.Hosts, 2);
  EXPECT_EQ(S.MaxPerHost, 2);
  EXPECT_EQ(D.Topo.fingerprint(), "b:[0,2]{[0,2]};a:[1,3]{[1,3]}");
  EXPECT_EQ(D.Source.rfind("discovered: 2 hosts (MPI shared-memory split)", 0),
            0u);
}

TEST(TopologyDiscoveryTest, SameNameOnTwoHostsIsToldApart) {
  std::vector<RankPlacement> R = {placed("node", 0), placed("node", 1)};
  DiscoveredTopology D = topologyFromPlacements(R);
  ASSERT_EQ(D.Topo.Hosts.size(), 2u);
  EXPECT_EQ(D.Topo.Hosts[0].Name, "node#0");
  EXPECT_EQ(D.Topo.Hosts[1].Name, "node#1");
}

TEST(TopologyDiscoveryTest, NvlinkDomainsFromPeerAccess) {
  // GPUs 0-1 reach each other, 2-3 reach each other; 1 also claims 2, but
  // 2 does not claim 1, so they are not one domain.
  std::vector<RankPlacement> R = {
      placed("h", 0, 0, {0, 1}), placed("h", 0, 1, {0, 1, 2}),
      placed("h", 0, 2, {2, 3}), placed("h", 0, 3, {2, 3})};
  DiscoveredTopology D = topologyFromPlacements(R);
  ASSERT_EQ(D.Topo.Hosts.size(), 1u);
  EXPECT_EQ(D.Topo.Hosts[0].Domains,
            (std::vector<std::vector<int64_t>>{{0, 1}, {2, 3}}));
  EXPECT_EQ(D.Topo.spanOf({0, 1, 2, 3}).Domains, 2);
  EXPECT_EQ(D.Topo.spanOf({0, 1}).Domains, 1);
  EXPECT_EQ(D.Source, "discovered: 1 host 'h' (MPI shared-memory split); "
                      "NVLink domains from CUDA peer access");
  // All-to-all peers (NVSwitch): one domain, the default.
  std::vector<RankPlacement> All;
  for (int G = 0; G < 4; ++G)
    All.push_back(placed("h", 0, G, {0, 1, 2, 3}));
  EXPECT_TRUE(topologyFromPlacements(All).Topo.isDefault());
  // Ranks sharing a GPU (more ranks than GPUs) are in its domain.
  std::vector<RankPlacement> Shared = {placed("h", 0, 0, {0}),
                                       placed("h", 0, 0, {0})};
  EXPECT_TRUE(topologyFromPlacements(Shared).Topo.isDefault());
}

TEST(TopologyDiscoveryTest, AHostWithoutGpuIsOneDomain) {
  std::vector<RankPlacement> R = {placed("a", 0, 0, {0}),
                                  placed("a", 0, 1, {1}), placed("b", 2),
                                  placed("b", 2)};
  DiscoveredTopology D = topologyFromPlacements(R);
  ASSERT_EQ(D.Topo.Hosts.size(), 2u);
  EXPECT_EQ(D.Topo.Hosts[0].Domains.size(), 2u);
  EXPECT_EQ(D.Topo.Hosts[1].Domains.size(), 1u);
  EXPECT_NE(D.Source.find("from CUDA peer access where a GPU was probed, "
                          "elsewhere one a host (no GPU: test)"),
            std::string::npos);
}

TEST(TopologyDiscoveryTest, DiscoverOverThreadRanks) {
  // The exchange itself over a group of one (MPI ranks run it under
  // mpirun: scripts/test-extra.d/mpi.sh and test/lit/Driver).
  SingleCommunicator One;
  llvm::Expected<DiscoveredTopology> D1 =
      discoverTopology(One, placed("solo", 0), std::chrono::seconds(5));
  ASSERT_TRUE(bool(D1)) << llvm::toString(D1.takeError());
  EXPECT_TRUE(D1->Topo.isDefault());
}
