//===- Types.cpp ----------------------------------------------------------===//
#include "mtsched/IR/Types.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/raw_ostream.h"

using namespace mtsched;

llvm::StringRef mtsched::dtypeName(DType T) {
  switch (T) {
  case DType::F32:
    return "f32";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::I32:
    return "i32";
  case DType::I64:
    return "i64";
  case DType::F8E4M3:
    return "f8e4m3";
  case DType::F8E5M2:
    return "f8e5m2";
  case DType::Bool:
    return "bool";
  }
  llvm_unreachable("unknown dtype");
}

std::optional<DType> mtsched::parseDType(llvm::StringRef Name) {
  return llvm::StringSwitch<std::optional<DType>>(Name)
      .Case("f32", DType::F32)
      .Case("f16", DType::F16)
      .Case("bf16", DType::BF16)
      .Case("i32", DType::I32)
      .Case("i64", DType::I64)
      .Case("f8e4m3", DType::F8E4M3)
      .Case("f8e5m2", DType::F8E5M2)
      .Case("bool", DType::Bool)
      .Default(std::nullopt);
}

unsigned mtsched::dtypeBytes(DType T) {
  switch (T) {
  case DType::F8E4M3:
  case DType::F8E5M2:
  case DType::Bool:
    return 1;
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::I64:
    return 8;
  }
  llvm_unreachable("unknown dtype");
}

bool mtsched::isFloatDType(DType T) {
  return T == DType::F32 || T == DType::F16 || T == DType::BF16 ||
         isFp8DType(T);
}

bool mtsched::isFp8DType(DType T) {
  return T == DType::F8E4M3 || T == DType::F8E5M2;
}

int64_t TensorType::numElements() const {
  int64_t N = 1;
  for (int64_t D : Shape)
    N *= D;
  return N;
}

std::string mtsched::shapeStr(llvm::ArrayRef<int64_t> Shape) {
  std::string S = "[";
  for (size_t I = 0; I < Shape.size(); ++I) {
    if (I)
      S += ",";
    S += std::to_string(Shape[I]);
  }
  return S + "]";
}

void TensorType::print(llvm::raw_ostream &OS) const {
  OS << dtypeName(Dtype) << shapeStr(Shape);
}

std::string TensorType::str() const {
  std::string S;
  llvm::raw_string_ostream OS(S);
  print(OS);
  return OS.str();
}
