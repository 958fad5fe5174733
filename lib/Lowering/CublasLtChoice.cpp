//===- CublasLtChoice.cpp -------------------------------------------------===//
#include "mtsched/Lowering/CublasLtChoice.h"
#include "llvm/ADT/Twine.h"

using namespace mtsched;

static constexpr llvm::StringLiteral Prefix = "extern.cublaslt";

std::string mtsched::cublasLtChoiceName(int Index) {
  return (Prefix + "_a" + llvm::Twine(Index)).str();
}

bool mtsched::isCublasLtName(llvm::StringRef Name) {
  return Name.starts_with(Prefix);
}

std::optional<int> mtsched::cublasLtAlgoOf(llvm::StringRef Name) {
  if (!Name.consume_front(Prefix) || !Name.consume_front("_a") ||
      Name.empty() || (Name.size() > 1 && Name.front() == '0'))
    return std::nullopt;
  unsigned Index = 0;
  if (Name.getAsInteger(10, Index) || Index >= unsigned(CublasLtListed))
    return std::nullopt;
  return int(Index);
}
