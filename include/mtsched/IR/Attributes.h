//===- Attributes.h - Constant attribute values -----------------*- C++ -*-===//
//
// Attributes are the `{key = value}` dictionaries on graphs, nodes and
// choices. Values are ints, floats, strings, bools or lists of those.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_IR_ATTRIBUTES_H
#define MTSCHED_IR_ATTRIBUTES_H

#include "llvm/ADT/StringRef.h"
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace llvm {
class raw_ostream;
}

namespace mtsched {

class Attribute {
public:
  enum class Kind { Int, Float, String, Bool, List };

  static Attribute getInt(int64_t V);
  static Attribute getFloat(double V);
  static Attribute getString(llvm::StringRef V);
  static Attribute getBool(bool V);
  static Attribute getList(std::vector<Attribute> Elements);

  Kind getKind() const { return K; }
  bool isInt() const { return K == Kind::Int; }
  bool isFloat() const { return K == Kind::Float; }
  bool isString() const { return K == Kind::String; }
  bool isBool() const { return K == Kind::Bool; }
  bool isList() const { return K == Kind::List; }

  int64_t getInt() const { return IntVal; }
  double getFloat() const { return FloatVal; }
  /// Numeric value of an int or float attribute.
  double getNumber() const { return isInt() ? double(IntVal) : FloatVal; }
  llvm::StringRef getString() const { return StrVal; }
  bool getBool() const { return IntVal != 0; }
  const std::vector<Attribute> &getList() const { return ListVal; }

  bool operator==(const Attribute &O) const;
  bool operator!=(const Attribute &O) const { return !(*this == O); }

  void print(llvm::raw_ostream &OS) const;

private:
  Kind K = Kind::Int;
  int64_t IntVal = 0;
  double FloatVal = 0;
  std::string StrVal;
  std::vector<Attribute> ListVal;
};

/// An ordered dictionary: printing keeps the order it was built in.
class AttrDict {
public:
  using Entry = std::pair<std::string, Attribute>;

  bool empty() const { return Entries.empty(); }
  size_t size() const { return Entries.size(); }
  const Attribute *get(llvm::StringRef Key) const;
  /// Sets Key, replacing an existing value in place.
  void set(llvm::StringRef Key, Attribute Value);
  /// Adds Key, which the caller knows is not there yet, at the end without
  /// searching (the parser checks keys itself, in constant time each).
  void append(llvm::StringRef Key, Attribute Value) {
    Entries.emplace_back(Key.str(), std::move(Value));
  }
  bool contains(llvm::StringRef Key) const { return get(Key) != nullptr; }

  std::optional<int64_t> getInt(llvm::StringRef Key) const;
  std::optional<llvm::StringRef> getString(llvm::StringRef Key) const;

  std::vector<Entry>::const_iterator begin() const { return Entries.begin(); }
  std::vector<Entry>::const_iterator end() const { return Entries.end(); }

  bool operator==(const AttrDict &O) const { return Entries == O.Entries; }

  /// Prints ` {a = 1, b = "x"}` (with the leading space), or nothing if empty.
  void print(llvm::raw_ostream &OS) const;

private:
  std::vector<Entry> Entries;
};

/// Prints a double so that parsing it back yields the same value, always
/// with a '.' or exponent so it reads back as a float.
void printFloat(llvm::raw_ostream &OS, double V);

} // namespace mtsched

#endif // MTSCHED_IR_ATTRIBUTES_H
