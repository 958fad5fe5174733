//===- DrawnValues.cpp - Seeded inputs as a reference reads them ----------===//
#include "mtsched/Reference/DrawnValues.h"
#include "mtsched/Reference/RandomInputs.h"
#include <algorithm>
#include <cassert>
#include <cmath>

using namespace mtsched;

/// Uniform U in [-1, 1) as an index in [0, Bound).
static double toIndex(double U, int64_t Bound) {
  return std::min<double>(double(Bound - 1),
                          std::floor((U + 1) / 2 * double(Bound)));
}

void DrawnValues::add(const Value *V, int64_t Count, uint64_t Seed,
                      uint64_t Stream, DType T, int64_t Bound) {
  Entry &E = Entries[V];
  E = Entry();
  E.Seed = Seed;
  E.Stream = Stream;
  E.Key = randomKey(Seed, Stream);
  E.Count = std::max<int64_t>(0, Count);
  E.T = T;
  E.Bound = std::max<int64_t>(0, Bound);
}

const DrawnValues::Entry &DrawnValues::entry(const Value *V) const {
  auto It = Entries.find(V);
  assert(It != Entries.end() && "a value the reference was not given");
  return It->second;
}

const std::vector<double> &DrawnValues::store(const Value *V) {
  Entry &E = Entries.find(V)->second;
  if (!E.Stored) {
    E.Elems =
        randomValues(E.Count, E.Seed, E.Stream, E.Bound ? DType::F32 : E.T);
    if (E.Bound)
      for (double &X : E.Elems)
        X = toIndex(X, E.Bound);
    E.Stored = true;
  }
  return E.Elems;
}

const double *DrawnValues::data(const Value *V) const {
  const Entry &E = entry(V);
  assert(E.Stored && "data() of a value not stored");
  return E.Elems.data();
}

std::vector<double> DrawnValues::slice(const Value *V, int64_t Begin,
                                       int64_t Len) const {
  const Entry &E = entry(V);
  assert(Begin >= 0 && Len >= 0 && Begin + Len <= E.Count);
  if (E.Stored)
    return std::vector<double>(E.Elems.begin() + Begin,
                               E.Elems.begin() + Begin + Len);
  std::vector<double> Out(static_cast<size_t>(Len));
  for (int64_t I = 0; I < Len; ++I)
    Out[size_t(I)] =
        E.Bound ? toIndex(randomValueAt(E.Key, Begin + I, DType::F32), E.Bound)
                : randomValueAt(E.Key, Begin + I, E.T);
  return Out;
}

int64_t DrawnValues::size(const Value *V) const {
  auto It = Entries.find(V);
  return It == Entries.end() ? -1 : It->second.Count;
}

double DrawnValues::at(const Value *V, int64_t I) const {
  const Entry &E = entry(V);
  if (E.Stored)
    return E.Elems[size_t(I)];
  return E.Bound ? toIndex(randomValueAt(E.Key, I, DType::F32), E.Bound)
                 : randomValueAt(E.Key, I, E.T);
}
