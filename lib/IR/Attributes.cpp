//===- Attributes.cpp -----------------------------------------------------===//
#include "mtsched/IR/Attributes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

using namespace mtsched;

Attribute Attribute::getInt(int64_t V) {
  Attribute A;
  A.K = Kind::Int;
  A.IntVal = V;
  return A;
}

Attribute Attribute::getFloat(double V) {
  Attribute A;
  A.K = Kind::Float;
  A.FloatVal = V;
  return A;
}

Attribute Attribute::getString(llvm::StringRef V) {
  Attribute A;
  A.K = Kind::String;
  A.StrVal = V.str();
  return A;
}

Attribute Attribute::getBool(bool V) {
  Attribute A;
  A.K = Kind::Bool;
  A.IntVal = V;
  return A;
}

Attribute Attribute::getList(std::vector<Attribute> Elements) {
  Attribute A;
  A.K = Kind::List;
  A.ListVal = std::move(Elements);
  return A;
}

bool Attribute::operator==(const Attribute &O) const {
  if (K != O.K)
    return false;
  switch (K) {
  case Kind::Int:
  case Kind::Bool:
    return IntVal == O.IntVal;
  case Kind::Float:
    // NaN scalars (a masked_fill's nan) print and read back as 'nan'; two
    // such attributes are the same attribute.
    return FloatVal == O.FloatVal ||
           (std::isnan(FloatVal) && std::isnan(O.FloatVal));
  case Kind::String:
    return StrVal == O.StrVal;
  case Kind::List:
    return ListVal == O.ListVal;
  }
  return false;
}

void mtsched::printFloat(llvm::raw_ostream &OS, double V) {
  if (std::isinf(V)) {
    OS << (V < 0 ? "-inf" : "inf");
    return;
  }
  // One spelling for every NaN: the parser reads 'nan', and a NaN's sign
  // and payload mean nothing to any op.
  if (std::isnan(V)) {
    OS << "nan";
    return;
  }
  // The shortest %g-style form that reads back exactly.
  char Buf[64];
  auto Res =
      std::to_chars(Buf, Buf + sizeof(Buf) - 1, V, std::chars_format::general);
  *Res.ptr = '\0';
  // %g switches to an exponent as soon as the integer part has more digits
  // than the precision, so 10 would print as 1e+01. Below 1e16 every such
  // value is an integer; print it in full, which reads back the same.
  if (const char *E = std::strchr(Buf, 'e')) {
    int Exp = std::atoi(E + 1);
    if (Exp >= 0 && Exp < 16)
      std::snprintf(Buf, sizeof(Buf), "%.0f", V);
  }
  llvm::StringRef S(Buf);
  OS << S;
  if (S.find_first_of(".e") == llvm::StringRef::npos && S != "nan")
    OS << ".0";
}

void Attribute::print(llvm::raw_ostream &OS) const {
  switch (K) {
  case Kind::Int:
    OS << IntVal;
    return;
  case Kind::Float:
    printFloat(OS, FloatVal);
    return;
  case Kind::String:
    OS << '"';
    OS.write_escaped(StrVal);
    OS << '"';
    return;
  case Kind::Bool:
    OS << (IntVal ? "true" : "false");
    return;
  case Kind::List:
    OS << '[';
    llvm::interleaveComma(ListVal, OS,
                          [&](const Attribute &A) { A.print(OS); });
    OS << ']';
    return;
  }
}

const Attribute *AttrDict::get(llvm::StringRef Key) const {
  for (const Entry &E : Entries)
    if (E.first == Key)
      return &E.second;
  return nullptr;
}

void AttrDict::set(llvm::StringRef Key, Attribute Value) {
  for (Entry &E : Entries)
    if (E.first == Key) {
      E.second = std::move(Value);
      return;
    }
  Entries.emplace_back(Key.str(), std::move(Value));
}

std::optional<int64_t> AttrDict::getInt(llvm::StringRef Key) const {
  const Attribute *A = get(Key);
  if (!A || !A->isInt())
    return std::nullopt;
  return A->getInt();
}

std::optional<llvm::StringRef> AttrDict::getString(llvm::StringRef Key) const {
  const Attribute *A = get(Key);
  if (!A || !A->isString())
    return std::nullopt;
  return A->getString();
}

void AttrDict::print(llvm::raw_ostream &OS) const {
  if (Entries.empty())
    return;
  OS << " {";
  llvm::interleaveComma(Entries, OS, [&](const Entry &E) {
    OS << E.first << " = ";
    E.second.print(OS);
  });
  OS << '}';
}
