//===- MpiSubgroups.cpp - Subgroups of the MPI ranks ----------------------===//
//
// MpiCommunicator's subgroups: those prepared at start by MPI_Comm_split,
// which fail on their own, and those made later, by their members only,
// with MPI_Comm_create_group.
//
//===----------------------------------------------------------------------===//
#include "MpiCommunicatorImpl.h"

using namespace mtsched;
using namespace mtsched::mpi;

llvm::Error
MpiCommunicator::prepareSubgroups(llvm::ArrayRef<std::vector<int>> Lists) {
  MpiWorld &W = *World;
  auto Fail = [](const llvm::Twine &Why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "cannot prepare subgroups: " + Why);
  };
  if (!Coll->Members.empty())
    return Fail("only the world's communicator prepares subgroups");
  if (!W.usable())
    return Fail("the MPI communicator is broken or departed");
  // Lists that share no rank are made by one MPI_Comm_split: each rank
  // takes the color of the list it is in, MPI_UNDEFINED if none, and its
  // position in that list as the key, so the new rank is that position.
  // Every process passes the same lists, so the splits match.
  std::vector<std::vector<size_t>> Layers;
  std::vector<std::vector<bool>> Used;
  for (size_t L = 0; L < Lists.size(); ++L) {
    for (int R : Lists[L])
      if (R < 0 || R >= Size)
        return Fail("rank " + llvm::Twine(R) + " is not in the world");
    size_t K = 0;
    for (; K < Layers.size(); ++K)
      if (llvm::none_of(Lists[L], [&](int R) { return Used[K][size_t(R)]; }))
        break;
    if (K == Layers.size()) {
      Layers.emplace_back();
      Used.emplace_back(size_t(Size), false);
    }
    Layers[K].push_back(L);
    for (int R : Lists[L])
      Used[K][size_t(R)] = true;
  }
  for (const std::vector<size_t> &Layer : Layers) {
    int Color = MPI_UNDEFINED, Key = 0;
    size_t Mine = Lists.size();
    for (size_t L : Layer)
      for (size_t I = 0; I < Lists[L].size(); ++I)
        if (Lists[L][I] == Rank) {
          Color = int(L);
          Key = int(I);
          Mine = L;
        }
    MPI_Comm New = MPI_COMM_NULL;
    if (MPI_Comm_split(asComm(Coll), Color, Key, &New) != MPI_SUCCESS) {
      W.Broken = true;
      return Fail("MPI_Comm_split failed");
    }
    if (New != MPI_COMM_NULL)
      MPI_Comm_set_errhandler(New, MPI_ERRORS_RETURN);
    for (size_t L : Layer)
      W.Prepared.emplace_back(Lists[L], L == Mine ? New : MPI_COMM_NULL);
  }
  return llvm::Error::success();
}

bool MpiCommunicator::createsSubgroupAtOnce(llvm::ArrayRef<int> Ranks) const {
  return Coll->Members.empty() &&
         llvm::any_of(World->Prepared, [&](const auto &P) {
           return llvm::ArrayRef<int>(P.first) == Ranks;
         });
}

llvm::Expected<std::unique_ptr<Communicator>>
MpiCommunicator::createSubgroup(llvm::ArrayRef<int> Ranks) {
  llvm::Expected<int> Index = subgroupIndex(Ranks, Size, Rank);
  if (!Index)
    return Index.takeError();
  MpiWorld &W = *World;
  // Made at start: nothing to wait for.
  if (Coll->Members.empty())
    for (size_t I = 0; I < W.Prepared.size(); ++I)
      if (const auto &P = W.Prepared[I];
          llvm::ArrayRef<int>(P.first) == Ranks && P.second != MPI_COMM_NULL) {
        auto *H = new MpiCommHandle(P.second, P.first, /*Local=*/true);
        // The same on every member: the lists are prepared in one order.
        H->ArriveTag = TagArrive + 1 + int(I);
        H->PeerBarriers.assign(Ranks.size(), 0);
        return std::unique_ptr<Communicator>(
            new MpiCommunicator(H, *Index, int(Ranks.size())));
      }
  auto Fail = [](const llvm::Twine &Why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "cannot create a subgroup: " + Why);
  };
  if (!W.usable())
    return Fail("the MPI communicator is broken or departed");
  MPI_Group Parent, Sub;
  if (MPI_Comm_group(asComm(Coll), &Parent) != MPI_SUCCESS)
    return Fail("MPI_Comm_group failed");
  int RC = MPI_Group_incl(Parent, int(Ranks.size()), Ranks.data(), &Sub);
  MPI_Group_free(&Parent);
  if (RC != MPI_SUCCESS)
    return Fail("MPI_Group_incl failed");
  // Only the members take part. The tag tells apart creations of different
  // groups that share members, should they ever overlap in time.
  int Tag = 0;
  for (int R : Ranks)
    Tag = (Tag * 31 + R + 1) & 0x3fff;
  MPI_Comm New = MPI_COMM_NULL;
  RC = MPI_Comm_create_group(asComm(Coll), Sub, Tag, &New);
  MPI_Group_free(&Sub);
  if (RC != MPI_SUCCESS || New == MPI_COMM_NULL) {
    W.Broken = true;
    return Fail("MPI_Comm_create_group failed");
  }
  MPI_Comm_set_errhandler(New, MPI_ERRORS_RETURN);
  int SubRank = 0, SubSize = 0;
  MPI_Comm_rank(New, &SubRank);
  MPI_Comm_size(New, &SubSize);
  return std::unique_ptr<Communicator>(
      new MpiCommunicator(new MpiCommHandle(New), SubRank, SubSize));
}
