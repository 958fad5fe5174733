//===- OpUnitKernels.h - The CUDA kernels of op units -----------*- C++ -*-===//
//
// The code generator's part of an op unit (IR/OpUnit.h): the kernel that
// the op's file in lib/OpUnits registers, which generateGraphKernels
// (--dump-kernels) and the --run executor ask for, and the pieces of
// kernel text such a file writes its kernel with.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_BACKEND_CUDA_OPUNITKERNELS_H
#define MTSCHED_BACKEND_CUDA_OPUNITKERNELS_H

#include "mtsched/Backend/Cuda/CudaCodegen.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/raw_ostream.h"
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace mtsched {

/// The kernel of verified node N of an op unit, its entry point named
/// after Name (sanitizeIdentifier); an error if N has a shape the kernel
/// does not handle.
using OpUnitKernelFn = llvm::Expected<KernelSource> (*)(llvm::StringRef Name,
                                                        const Node &N);

/// Registers op unit C's kernel (C an OP_UNIT of Ops.def).
void registerOpUnitKernel(OpCode C, OpUnitKernelFn Fn);
/// Op unit C's kernel; null if none is registered.
OpUnitKernelFn lookupOpUnitKernel(OpCode C);
/// The kernel of op-unit node N: lookupOpUnitKernel's, or an error naming
/// the op when none is registered.
llvm::Expected<KernelSource> generateOpUnitKernel(llvm::StringRef Name,
                                                  const Node &N);

/// The kernel of choice Choice (OpUnitInfo::Choices) of verified node N of
/// an op unit with kernel choices; an error for a choice it has no kernel
/// for (a library's).
using OpUnitChoiceKernelFn = llvm::Expected<KernelSource> (*)(
    llvm::StringRef Name, const Node &N, llvm::StringRef Choice);
/// Registers op unit C's kernels by choice.
void registerOpUnitChoiceKernel(OpCode C, OpUnitChoiceKernelFn Fn);
/// The kernel of choice Choice of op-unit node N, or an error naming the
/// op when it has no kernels by choice.
llvm::Expected<KernelSource> generateOpUnitChoiceKernel(llvm::StringRef Name,
                                                        const Node &N,
                                                        llvm::StringRef Choice);

/// An op unit's library choice (`extern.cudnn`) set up for one node: the
/// library is opened, the call described; the handle and the algorithm
/// wait for a stream (the context current).
struct OpUnitExternCall {
  /// Readies the call on Stream (a CUstream) and returns the bytes of
  /// device workspace it needs.
  std::function<llvm::Expected<size_t>(void *Stream)> Plan;
  /// Issues the call on Stream over the device pointers of N's operands
  /// (in order), its result and a workspace of Plan's size: 0, or the
  /// library's status.
  std::function<int(void *Stream, llvm::ArrayRef<void *> Operands, void *Result,
                    void *Workspace)>
      Run;
};
/// Sets choice Choice of N up; an error saying why it cannot run here
/// (the library cannot be loaded, the shape is not one it takes).
using OpUnitExternFn =
    llvm::Expected<OpUnitExternCall> (*)(const Node &N, llvm::StringRef Choice);
/// Registers op unit C's library choices.
void registerOpUnitExtern(OpCode C, OpUnitExternFn Fn);
/// Choice Choice of op-unit node N set up; an error naming the op when it
/// has no library choices.
llvm::Expected<OpUnitExternCall> prepareOpUnitExtern(const Node &N,
                                                     llvm::StringRef Choice);

namespace codegen {

/// The C type a tensor of dtype T is stored as.
const char *storageType(DType T);
/// Converts float expression V to dtype T's storage.
std::string storeExpr(DType T, const std::string &V);
/// The load of element Idx of Ptr (of element type T) as a float.
std::string loadExpr(DType T, const std::string &Ptr, const std::string &Idx);
/// D as a float literal that round-trips.
std::string flt(double D);

/// Collects the parameters of a kernel: inputs first, deduplicated.
struct ParamList {
  llvm::SetVector<const Value *> Inputs;
  std::vector<const Value *> Outputs;

  std::string name(const Value *V) const;
  std::string signature() const;
};

/// The text every generated kernel starts with: storage types,
/// conversions, reductions and the op table's device functions (mt_pow).
llvm::StringRef kernelPrelude();

/// The kernel Fn with Source over P's values, launched as one grid-stride
/// loop over Work items in blocks of Block threads (the grid capped at 2^20
/// blocks): the layout kernels and the op units' (scatter, cumsum, prod).
KernelSource gridStrideKernel(std::string Fn, std::string Source,
                              const ParamList &P, unsigned Block, int64_t Work);

/// The start of a kernel Fn with one thread per fibre across a dimension
/// (scatter, cumsum, prod): the prelude, a comment line saying What, the
/// signature and a grid-stride loop over Fibres fibres that defines `o`
/// (the index before the dimension) and `c` (after it, of Inner). The body
/// follows, then "  }\n}\n" closes the loop and the kernel.
void emitFibreKernelHead(llvm::raw_ostream &OS, llvm::StringRef What,
                         llvm::StringRef Fn, const ParamList &P, unsigned Block,
                         int64_t Fibres, int64_t Inner);

/// A tile of the grouped_mm kernel (GroupedGemm.cpp): BM routed rows of one
/// expert by BN columns, BK of K a stage, Warps warps, Stages stages in
/// flight; TensorCores false is the SIMT loop (f32, K not a multiple of 8).
/// Choice names: `gmm_<BM>x<BN>x<BK>_w<Warps>_s<Stages>` and `gmm_simt`.
struct GroupedMmTile {
  int BM = 16, BN = 64, BK = 64, Warps = 2, Stages = 4;
  bool TensorCores = true;
};
std::string groupedMmChoiceName(const GroupedMmTile &T);
/// The tile choice Name names; nullopt for another name or a tile that
/// does not split into 16 x 16 warp tiles.
std::optional<GroupedMmTile> groupedMmTileOf(llvm::StringRef Name);
/// Warps along M and N of tile T: warp tiles of at least 16 x 16 with an
/// even number of n8 fragments, as square as possible; false if none.
bool groupedMmWarps(const GroupedMmTile &T, int &WarpsM, int &WarpsN);
/// Bytes of dynamic shared memory tile T's kernel takes.
int64_t groupedMmSharedBytes(const GroupedMmTile &T);
/// The tile a `buffer grouped_mm` (no choice) runs: 16 rows where the
/// experts average at most 16 rows, else 64 x 128; the SIMT loop where the
/// tensor cores cannot run (Dt not bf16/f16, K not a multiple of 8).
GroupedMmTile defaultGroupedMmTile(int64_t Rows, int64_t Experts, int64_t K,
                                   DType Dt);

/// The kernel of `grouped_mm` node N (lib/OpUnits/GroupedMm.cpp) with tile
/// T (the default tile without one), in GroupedGemm.cpp beside the
/// mma.sync GEMM pieces it reuses: one launch over every expert's rows, the
/// per-expert row counts, offsets and row lists computed on the device from
/// the ids.
llvm::Expected<KernelSource>
generateGroupedMmKernel(llvm::StringRef Name, const Node &N,
                        std::optional<GroupedMmTile> T = std::nullopt);

} // namespace codegen
} // namespace mtsched

#endif // MTSCHED_BACKEND_CUDA_OPUNITKERNELS_H
