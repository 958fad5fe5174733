//===- OpUnit.cpp - The IR's table of op units ----------------------------===//
#include "mtsched/IR/OpUnit.h"
#include "mtsched/IR/Graph.h"
#include <cassert>

using namespace mtsched;

namespace {
struct Entry {
  OpUnitInfo Info;
  bool Registered = false;
};

Entry Table[NumOpCodes];
} // namespace

void mtsched::registerOpUnitInfo(OpCode C, const OpUnitInfo &Info) {
  assert(isOpUnit(C) && "not an OP_UNIT of Ops.def");
  Table[unsigned(C)] = {Info, true};
}

const OpUnitInfo *mtsched::lookupOpUnitInfo(OpCode C) {
  const Entry &E = Table[unsigned(C)];
  return E.Registered ? &E.Info : nullptr;
}

bool mtsched::hasOpUnitChoices(OpCode C) {
  const OpUnitInfo *Info = lookupOpUnitInfo(C);
  return Info && Info->Choices;
}

bool mtsched::opUnitOffersChoice(llvm::StringRef Name) {
  for (const Entry &E : Table)
    if (E.Registered && E.Info.OffersChoice && E.Info.OffersChoice(Name))
      return true;
  return false;
}

std::optional<int64_t> mtsched::verifyDimAttr(const Node &N, int64_t Rank,
                                              int64_t Default,
                                              OpErrorFn Error) {
  int64_t D = Default;
  if (const Attribute *A = N.getAttrs().get("dim")) {
    if (!A->isInt()) {
      Error(N.getLoc(), "attribute 'dim' must be an integer");
      return std::nullopt;
    }
    D = A->getInt();
  }
  if (D < -Rank || D >= Rank) {
    Error(N.getLoc(), "dimension " + llvm::Twine(D) +
                          " is out of range for a tensor of rank " +
                          llvm::Twine(Rank));
    return std::nullopt;
  }
  return D < 0 ? D + Rank : D;
}
