//===- Scan.cpp - A tensor split around one dimension ---------------------===//
#include "mtsched/IR/Scan.h"
#include "mtsched/IR/Graph.h"

using namespace mtsched;

std::optional<ScanShape> mtsched::splitAtDim(const TensorType &T,
                                             const Node &N) {
  int64_t Rank = T.rank(), D = Rank - 1;
  if (const Attribute *A = N.getAttrs().get("dim"))
    D = A->isInt() ? A->getInt() : Rank;
  if (D < 0)
    D += Rank;
  if (Rank == 0 || D < 0 || D >= Rank)
    return std::nullopt;
  ScanShape S;
  for (int64_t I = 0; I < Rank; ++I) {
    if (I < D)
      S.Outer *= T.Shape[I];
    else if (I > D)
      S.Inner *= T.Shape[I];
  }
  S.Len = T.Shape[D];
  S.Dim = D;
  return S;
}
