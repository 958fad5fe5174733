//===- Types.h - Element and tensor types -----------------------*- C++ -*-===//
//
// Tensor types are a dtype plus a static shape, e.g. `bf16[1024,4096]`.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_IR_TYPES_H
#define MTSCHED_IR_TYPES_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include <cstdint>
#include <optional>
#include <string>

namespace llvm {
class raw_ostream;
}

namespace mtsched {

/// F8E4M3 and F8E5M2 are the OCP 8-bit floats (PyTorch's float8_e4m3fn and
/// float8_e5m2): e4m3 has no infinity and one NaN pattern per sign, its
/// largest finite value 448; e5m2 is IEEE-like, largest finite 57344.
/// Bool (PyTorch's torch.bool, NumPy's '|b1') is one byte holding 0 or 1:
/// what comparisons and logical ops produce and where's condition reads.
enum class DType { F32, F16, BF16, I32, I64, F8E4M3, F8E5M2, Bool };

llvm::StringRef dtypeName(DType T);
std::optional<DType> parseDType(llvm::StringRef Name);
/// Size of one element in bytes.
unsigned dtypeBytes(DType T);
bool isFloatDType(DType T);
/// f8e4m3 or f8e5m2: stored in one byte, used by matmul with per-tensor
/// scales.
bool isFp8DType(DType T);

struct TensorType {
  DType Dtype = DType::F32;
  llvm::SmallVector<int64_t, 4> Shape;

  TensorType() = default;
  TensorType(DType Dtype, llvm::ArrayRef<int64_t> Shape)
      : Dtype(Dtype), Shape(Shape.begin(), Shape.end()) {}

  unsigned rank() const { return Shape.size(); }
  int64_t numElements() const;
  int64_t numBytes() const { return numElements() * dtypeBytes(Dtype); }
  /// Size of the last dimension (1 for a scalar).
  int64_t innerDim() const { return Shape.empty() ? 1 : Shape.back(); }

  bool operator==(const TensorType &O) const {
    return Dtype == O.Dtype && Shape == O.Shape;
  }
  bool operator!=(const TensorType &O) const { return !(*this == O); }

  void print(llvm::raw_ostream &OS) const;
  std::string str() const;
};

/// Formats a shape as `[4,8]`.
std::string shapeStr(llvm::ArrayRef<int64_t> Shape);

} // namespace mtsched

#endif // MTSCHED_IR_TYPES_H
