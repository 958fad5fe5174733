//===- OpUnit.h - The IR's part of an op with its own kernel ----*- C++ -*-===//
//
// An op unit is an op with its own kernel, declared by one OP_UNIT line of
// Ops.def and defined in one file, lib/OpUnits/<File>.cpp (one per op, or
// per family: topk and sort share Sort.cpp). That file
// registers each of its parts with the library that consults it: the type
// rule and the cost here (the verifier, the timeline), the fp64 reference
// with the interpreter (Reference/OpUnitReference.h), the kernel with the
// CUDA code generator (Backend/Cuda/OpUnitKernels.h). Registration is an
// explicit call, registerAllOpUnits() (OpUnits/OpUnits.h), made by every
// tool and by the runtime library before they read IR: a static
// initializer in a static library is dropped when nothing refers to it.
//
// The tables are written once, under registerAllOpUnits()'s call_once, and
// only read afterwards, so readers on several threads need no lock.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_IR_OPUNIT_H
#define MTSCHED_IR_OPUNIT_H

#include "mtsched/IR/Ops.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/SMLoc.h"
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mtsched {

class Node;
struct TensorType;

/// Reports a verifier error at a location (the node's, or an operand's).
using OpErrorFn = llvm::function_ref<void(llvm::SMLoc, const llvm::Twine &)>;

/// The simulator's terms for one kernel choice of an op unit: this layer
/// cannot see a device description, so Autotune/Workload.cpp turns them
/// into a time on one (a roofline: the slower of the arithmetic at the
/// choice's efficiency and the memory traffic, plus a launch).
struct OpUnitChoiceCost {
  /// Arithmetic, and the bytes the kernel moves to and from HBM.
  double Flops = 0, Bytes = 0;
  /// On the tensor cores (the 16-bit peak) rather than the CUDA cores.
  bool TensorCores = false;
  /// The fraction of that peak the kernel reaches with every SM busy.
  double Efficiency = 1;
  /// CTAs in its grid and how many fit on one SM at a time, for the last
  /// wave's idle SMs; 0 CTAs where the grid is not known (a library's).
  int64_t Ctas = 0;
  int CtasPerSm = 1;
};

/// The IR's part of an op unit.
struct OpUnitInfo {
  /// The type rule: checks N's operands and attributes (the verifier has
  /// checked the operand and result counts against Ops.def) and computes
  /// the type of each result into Results (as many as the OP_UNIT line's
  /// Results), reporting each mistake through Error at its line and
  /// column; false after an error.
  bool (*InferType)(const Node &N, llvm::MutableArrayRef<TensorType> Results,
                    OpErrorFn Error) = nullptr;
  /// The arithmetic of verified node N for the roofline's compute side; the
  /// memory side is the bytes its kernel reads and writes.
  double (*Flops)(const Node &N) = nullptr;
  /// Optional, for ops that read integer operands as positions: the bound
  /// B of verified node N's operand I, whose values must lie in [0, B)
  /// (scatter's index: the destination's length along 'dim'); nullopt for
  /// an operand that is not such an index. Inputs drawn at random
  /// (Reference/Npy.h, makeGraphInputs) stay inside it.
  std::optional<int64_t> (*IndexBound)(const Node &N, unsigned I) = nullptr;
  /// Optional: the kernels verified node N can choose among, in the order
  /// offered, each fitting N's shape (library calls named `extern.*`). An
  /// op unit with this hook lowers to a multi_template_buffer of these
  /// choices (less those --disable-choices names) instead of a buffer, the
  /// autotuner picks one, and its kernel (Backend/Cuda/OpUnitKernels.h) is
  /// asked for the decided one.
  std::vector<std::string> (*Choices)(const Node &N) = nullptr;
  /// With Choices: whether some node of this op can be offered a choice
  /// named Name (a --disable-choices name is checked against it).
  bool (*OffersChoice)(llvm::StringRef Name) = nullptr;
  /// With Choices: the simulator's terms of choice Name of N; nullopt if
  /// Name is not one N can run.
  std::optional<OpUnitChoiceCost> (*ChoiceCost)(const Node &N,
                                                llvm::StringRef Name) = nullptr;
};

/// Registers the IR's part of op unit C (an OP_UNIT of Ops.def).
void registerOpUnitInfo(OpCode C, const OpUnitInfo &Info);
/// The registered part of op unit C; null if C is not an op unit or
/// registerAllOpUnits() was not called.
const OpUnitInfo *lookupOpUnitInfo(OpCode C);
/// Whether op C is an op unit with kernel choices (OpUnitInfo::Choices):
/// one lowered to a multi_template_buffer.
bool hasOpUnitChoices(OpCode C);
/// Whether some registered op unit can offer a choice named Name.
bool opUnitOffersChoice(llvm::StringRef Name);

/// Attribute 'dim' of N (Default if absent) for an operand of rank Rank,
/// counted from the front; reports a non-integer or out-of-range one with
/// the verifier's words and returns nullopt.
std::optional<int64_t> verifyDimAttr(const Node &N, int64_t Rank,
                                     int64_t Default, OpErrorFn Error);

} // namespace mtsched

#endif // MTSCHED_IR_OPUNIT_H
