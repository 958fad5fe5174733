//===- Topology.cpp - Topology files and the default topology -------------===//
#include "mtsched/Runtime/Topology.h"
#include "mtsched/Support/FileIO.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>

using namespace mtsched;

namespace {

/// The largest rank a file may name: far beyond any job, small enough that
/// the checks below never allocate much for a mistyped number.
constexpr int64_t MaxTopologyRank = int64_t(1) << 24;

llvm::Error fileError(llvm::StringRef Path, const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 Path + ": " + Msg);
}

/// llvm::json::parse's message is `[LINE:COL, byte=N]: MSG`; the project's
/// file errors read `PATH:LINE:COL: MSG`.
llvm::Error syntaxError(llvm::StringRef Path, std::string Msg) {
  llvm::Regex Re("^\\[([0-9]+):([0-9]+), byte=[0-9]+\\]: (.*)$");
  llvm::SmallVector<llvm::StringRef, 4> M;
  if (Re.match(Msg, &M))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   Path + ":" + M[1] + ":" + M[2] +
                                       ": invalid JSON: " + M[3]);
  return fileError(Path, "invalid JSON: " + Msg);
}

/// Reads a JSON array of ranks at Where.
llvm::Error readRanks(const llvm::json::Value *V, const std::string &Where,
                      llvm::StringRef Path, std::vector<int64_t> &Out) {
  const llvm::json::Array *A = V ? V->getAsArray() : nullptr;
  if (!A)
    return fileError(Path, Where + ": must be an array of ranks");
  if (A->empty())
    return fileError(Path, Where + ": must not be empty");
  for (size_t I = 0; I < A->size(); ++I) {
    std::optional<int64_t> R = (*A)[I].getAsInteger();
    if (!R || *R < 0 || *R > MaxTopologyRank)
      return fileError(Path, Where + "[" + llvm::Twine(I) +
                                 "]: a rank must be an integer in [0, " +
                                 llvm::Twine(MaxTopologyRank) + "]");
    Out.push_back(*R);
  }
  return llvm::Error::success();
}

} // namespace

llvm::Expected<Topology> mtsched::parseTopologyJSON(llvm::StringRef Text,
                                                    llvm::StringRef Path) {
  llvm::Expected<llvm::json::Value> Parsed = llvm::json::parse(Text);
  if (!Parsed)
    return syntaxError(Path, llvm::toString(Parsed.takeError()));
  const llvm::json::Object *Root = Parsed->getAsObject();
  if (!Root)
    return fileError(Path, "a topology file must hold a JSON object");
  for (const auto &KV : *Root)
    if (KV.first != "hosts")
      return fileError(Path, "unknown key '" + KV.first.str() + "'");
  const llvm::json::Array *Hosts = nullptr;
  if (const llvm::json::Value *H = Root->get("hosts"))
    Hosts = H->getAsArray();
  if (!Hosts)
    return fileError(Path, "key 'hosts' must be an array of hosts");
  if (Hosts->empty())
    return fileError(Path, "key 'hosts' must list at least one host");

  Topology T;
  // Where each rank was listed first, for the duplicate message.
  llvm::DenseMap<int64_t, std::string> SeenAt;
  llvm::StringSet<> Names;
  for (size_t HI = 0; HI < Hosts->size(); ++HI) {
    std::string Where = "hosts[" + std::to_string(HI) + "]";
    const llvm::json::Object *HO = (*Hosts)[HI].getAsObject();
    if (!HO)
      return fileError(Path, Where + ": a host must be a JSON object");
    for (const auto &KV : *HO)
      if (KV.first != "name" && KV.first != "ranks" &&
          KV.first != "nvlink_domains")
        return fileError(Path,
                         Where + ": unknown key '" + KV.first.str() + "'");
    Topology::Host H;
    if (const llvm::json::Value *N = HO->get("name")) {
      std::optional<llvm::StringRef> S = N->getAsString();
      if (!S || S->empty())
        return fileError(Path, Where + ".name: must be a non-empty string");
      H.Name = S->str();
    } else {
      H.Name = "host" + std::to_string(HI);
    }
    if (llvm::Error E =
            readRanks(HO->get("ranks"), Where + ".ranks", Path, H.Ranks))
      return std::move(E);
    for (size_t I = 0; I < H.Ranks.size(); ++I) {
      std::string At = Where + ".ranks[" + std::to_string(I) + "]";
      auto [It, New] = SeenAt.try_emplace(H.Ranks[I], At);
      if (!New)
        return fileError(Path, At + ": rank " + llvm::Twine(H.Ranks[I]) +
                                   " is already listed at " + It->second);
    }
    if (const llvm::json::Value *D = HO->get("nvlink_domains")) {
      const llvm::json::Array *DA = D->getAsArray();
      if (!DA || DA->empty())
        return fileError(Path, Where + ".nvlink_domains: must be a non-empty "
                                       "array of arrays of ranks");
      llvm::DenseSet<int64_t> HostRanks(H.Ranks.begin(), H.Ranks.end());
      llvm::DenseSet<int64_t> InDomain;
      for (size_t DI = 0; DI < DA->size(); ++DI) {
        std::string DWhere =
            Where + ".nvlink_domains[" + std::to_string(DI) + "]";
        std::vector<int64_t> Dom;
        if (llvm::Error E = readRanks(&(*DA)[DI], DWhere, Path, Dom))
          return std::move(E);
        for (size_t I = 0; I < Dom.size(); ++I) {
          std::string At = DWhere + "[" + std::to_string(I) + "]";
          if (!HostRanks.count(Dom[I]))
            return fileError(Path, At + ": rank " + llvm::Twine(Dom[I]) +
                                       " is not one of the host's ranks");
          if (!InDomain.insert(Dom[I]).second)
            return fileError(Path, At + ": rank " + llvm::Twine(Dom[I]) +
                                       " is in two NVLink domains");
        }
        H.Domains.push_back(std::move(Dom));
      }
      if (InDomain.size() != HostRanks.size())
        for (int64_t R : H.Ranks)
          if (!InDomain.count(R))
            return fileError(Path, Where + ".nvlink_domains: rank " +
                                       llvm::Twine(R) +
                                       " of the host is in no NVLink domain");
    } else {
      // A host without domains is one NVLink domain (an NVSwitch machine).
      H.Domains.push_back(H.Ranks);
    }
    if (!Names.insert(H.Name).second)
      return fileError(Path,
                       Where + ".name: host '" + H.Name + "' is listed twice");
    T.Hosts.push_back(std::move(H));
  }
  return T;
}

llvm::Expected<Topology> mtsched::loadTopologyFile(llvm::StringRef Path) {
  llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> Buf =
      readBoundedFile(Path, MaxConfigFileBytes, "a topology file");
  if (!Buf)
    return fileError(Path, "cannot read topology file: " +
                               llvm::toString(Buf.takeError()));
  return parseTopologyJSON((*Buf)->getBuffer(), Path);
}

Topology::Span Topology::spanOf(llvm::ArrayRef<int64_t> Ranks) const {
  Span S;
  S.MaxPerHost = int(Ranks.size());
  if (isDefault())
    return S;
  llvm::DenseMap<int64_t, std::pair<size_t, size_t>> Where;
  for (size_t HI = 0; HI < Hosts.size(); ++HI)
    for (size_t DI = 0; DI < Hosts[HI].Domains.size(); ++DI)
      for (int64_t R : Hosts[HI].Domains[DI])
        Where[R] = {HI, DI};
  llvm::DenseMap<size_t, int> PerHost;
  llvm::DenseSet<std::pair<size_t, size_t>> Domains;
  int Unlisted = 0;
  for (int64_t R : Ranks) {
    auto It = Where.find(R);
    if (It == Where.end()) {
      ++Unlisted;
      continue;
    }
    ++PerHost[It->second.first];
    Domains.insert(It->second);
  }
  S.Hosts = int(PerHost.size()) + Unlisted;
  S.Domains = int(Domains.size()) + Unlisted;
  S.MaxPerHost = Unlisted ? 1 : 0;
  for (const auto &KV : PerHost)
    S.MaxPerHost = std::max(S.MaxPerHost, KV.second);
  return S;
}

llvm::Error Topology::checkWorld(int64_t WorldSize,
                                 llvm::StringRef Path) const {
  if (isDefault())
    return llvm::Error::success();
  int64_t Listed = 0;
  for (const Host &H : Hosts)
    for (int64_t R : H.Ranks) {
      if (R >= WorldSize)
        return fileError(Path, "host '" + H.Name + "' lists rank " +
                                   llvm::Twine(R) + ", but there are " +
                                   llvm::Twine(WorldSize) + " ranks");
      ++Listed;
    }
  // Ranks are distinct (the parser checks) and below WorldSize.
  if (Listed != WorldSize)
    return fileError(Path, "lists " + llvm::Twine(Listed) + " of the " +
                               llvm::Twine(WorldSize) +
                               " ranks: every rank must be on a host");
  return llvm::Error::success();
}

std::string Topology::fingerprint() const {
  if (isDefault())
    return "default";
  std::string S;
  llvm::raw_string_ostream OS(S);
  for (size_t HI = 0; HI < Hosts.size(); ++HI) {
    const Host &H = Hosts[HI];
    // The pre-sync's flags are space-separated words.
    std::string Name = H.Name;
    std::replace(Name.begin(), Name.end(), ' ', '_');
    OS << (HI ? ";" : "") << Name << ":[";
    llvm::interleave(H.Ranks, OS, ",");
    OS << "]{";
    for (size_t DI = 0; DI < H.Domains.size(); ++DI) {
      OS << (DI ? "," : "") << "[";
      llvm::interleave(H.Domains[DI], OS, ",");
      OS << "]";
    }
    OS << "}";
  }
  return OS.str();
}

//===----------------------------------------------------------------------===//
// Discovery
//===----------------------------------------------------------------------===//

/// A field of an encoded placement: tabs and newlines separate fields and
/// ranks' lines, so they cannot appear inside one.
static std::string field(llvm::StringRef S) {
  std::string Out = S.str();
  for (char &C : Out)
    if (C == '\t' || C == '\n' || C == '\r')
      C = ' ';
  return Out;
}

std::string RankPlacement::encode() const {
  std::string S;
  llvm::raw_string_ostream OS(S);
  OS << "p1\t" << Host.Key << '\t' << field(Host.Name) << '\t'
     << field(Host.Method) << '\t' << Ordinal << '\t';
  llvm::interleave(PeerOrdinals, OS, ",");
  OS << '\t' << field(NoGpuReason);
  return OS.str();
}

bool RankPlacement::decode(llvm::StringRef Line, RankPlacement &Out) {
  llvm::SmallVector<llvm::StringRef, 8> F;
  Line.split(F, '\t', /*MaxSplit=*/-1, /*KeepEmpty=*/true);
  if (F.size() != 7 || F[0] != "p1")
    return false;
  RankPlacement P;
  if (F[1].getAsInteger(10, P.Host.Key) || F[4].getAsInteger(10, P.Ordinal) ||
      P.Ordinal < -1)
    return false;
  P.Host.Name = F[2].str();
  P.Host.Method = F[3].str();
  if (!F[5].empty()) {
    llvm::SmallVector<llvm::StringRef, 8> Peers;
    F[5].split(Peers, ',');
    for (llvm::StringRef X : Peers) {
      int V = 0;
      if (X.getAsInteger(10, V) || V < 0)
        return false;
      P.PeerOrdinals.push_back(V);
    }
  }
  P.NoGpuReason = F[6].str();
  Out = std::move(P);
  return true;
}

DiscoveredTopology
mtsched::topologyFromPlacements(llvm::ArrayRef<RankPlacement> Ranks) {
  DiscoveredTopology D;
  // Hosts in order of their lowest rank.
  llvm::DenseMap<int64_t, size_t> HostOf;
  std::vector<int64_t> Keys;
  for (size_t R = 0; R < Ranks.size(); ++R) {
    auto [It, New] = HostOf.try_emplace(Ranks[R].Host.Key, Keys.size());
    if (New) {
      Keys.push_back(Ranks[R].Host.Key);
      D.Topo.Hosts.emplace_back();
      D.Topo.Hosts.back().Name = Ranks[R].Host.Name;
    }
    D.Topo.Hosts[It->second].Ranks.push_back(int64_t(R));
  }
  // A name that two hosts share (containers named alike) is told apart by
  // the key, so that the file form stays valid.
  llvm::StringMap<int> NameUses;
  for (const Topology::Host &H : D.Topo.Hosts)
    ++NameUses[H.Name];
  for (size_t HI = 0; HI < D.Topo.Hosts.size(); ++HI)
    if (NameUses[D.Topo.Hosts[HI].Name] > 1 || D.Topo.Hosts[HI].Name.empty())
      D.Topo.Hosts[HI].Name += "#" + std::to_string(Keys[HI]);

  // NVLink domains: a rank joins the first domain all of whose ranks' GPUs
  // and its own reach each other (peer memory loads and stores across every
  // pair of a group), else starts one.
  std::string NotProbed;
  bool AnyProbed = false;
  for (Topology::Host &H : D.Topo.Hosts) {
    bool Probed =
        llvm::all_of(H.Ranks, [&](int64_t R) { return Ranks[R].Ordinal >= 0; });
    if (!Probed) {
      for (int64_t R : H.Ranks)
        if (Ranks[R].Ordinal < 0 && NotProbed.empty())
          NotProbed =
              Ranks[R].NoGpuReason.empty() ? "no GPU" : Ranks[R].NoGpuReason;
      H.Domains.push_back(H.Ranks);
      continue;
    }
    AnyProbed = true;
    auto Reaches = [&](int64_t A, int64_t B) {
      return llvm::is_contained(Ranks[A].PeerOrdinals, Ranks[B].Ordinal) &&
             llvm::is_contained(Ranks[B].PeerOrdinals, Ranks[A].Ordinal);
    };
    for (int64_t R : H.Ranks) {
      auto It = llvm::find_if(H.Domains, [&](const std::vector<int64_t> &Dom) {
        return llvm::all_of(Dom, [&](int64_t O) { return Reaches(R, O); });
      });
      if (It == H.Domains.end())
        H.Domains.push_back({R});
      else
        It->push_back(R);
    }
  }

  std::string Method = Ranks.empty() ? "" : Ranks.front().Host.Method;
  llvm::raw_string_ostream OS(D.Source);
  size_t NH = D.Topo.Hosts.size();
  OS << "discovered: " << NH << (NH == 1 ? " host" : " hosts");
  if (NH == 1)
    OS << " '" << D.Topo.Hosts.front().Name << "'";
  OS << " (" << Method << "); NVLink domains ";
  if (AnyProbed && NotProbed.empty())
    OS << "from CUDA peer access";
  else if (AnyProbed)
    OS << "from CUDA peer access where a GPU was probed, elsewhere one a "
          "host ("
       << NotProbed << ")";
  else
    OS << "not probed, one a host (" << NotProbed << ")";
  if (NH == 1 && D.Topo.Hosts.front().Domains.size() == 1)
    D.Topo.Hosts.clear();
  return D;
}

llvm::Expected<DiscoveredTopology>
mtsched::discoverTopology(Communicator &World, const RankPlacement &Mine,
                          std::chrono::milliseconds Timeout) {
  std::vector<std::string> All;
  CommStatus S = World.allGather(Mine.encode(), All, Timeout);
  if (S != CommStatus::Ok) {
    std::string Missing;
    for (int R : World.missingPeers())
      Missing += (Missing.empty() ? "" : ", ") + std::to_string(R);
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "topology discovery: the exchange of hosts failed (" +
            commStatusName(S).str() +
            (Missing.empty() ? "" : ", ranks " + Missing) +
            "); pass --topology=FILE to skip it");
  }
  std::vector<RankPlacement> Ranks(All.size());
  for (size_t R = 0; R < All.size(); ++R)
    if (!RankPlacement::decode(All[R], Ranks[R]))
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "topology discovery: rank " + std::to_string(R) +
              " sent a placement this rank cannot read (another mtsched "
              "version?)");
  return topologyFromPlacements(Ranks);
}
