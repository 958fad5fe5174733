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
