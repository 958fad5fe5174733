//===- Npy.h - NumPy .npy files for the inputs and outputs of --run -*- C++
//-*-===//
//
// `--run` and `--interpret` take a graph's inputs from .npy files (one per
// input, DIR/<name>.npy) and write its outputs the same way, so a graph
// imported from PyTorch can be run on the same inputs as PyTorch and its
// outputs compared. Version 1.0-3.0 files, little-endian, C order.
//
// Element types: reading accepts f2, f4, f8, i1, i2, i4, i8, u1, b1 for any
// input and rounds each value to the input's element type (numpy has no
// bfloat16: a bf16 input is read from an f4 or f8 file, rounded to nearest
// even). Integer files are read as integers, never through doubles: an i8
// value above 2^53 reaches an i64 input exactly; a value an integer input
// cannot hold (beyond i32's range, or a float file's NaN) is an error.
// Writing uses the output's type, except bf16, written as f4 (every bf16
// value is exactly an f4 value).
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_REFERENCE_NPY_H
#define MTSCHED_REFERENCE_NPY_H

#include "mtsched/IR/Graph.h"
#include "mtsched/Reference/Interpreter.h"
#include "llvm/Support/Error.h"
#include <cstdint>
#include <string>
#include <vector>

namespace mtsched {

/// An array read from a .npy file.
struct NpyArray {
  std::vector<int64_t> Shape;
  /// The numpy type string, e.g. "<f4".
  std::string Descr;
  /// int64_t for the integer and boolean kinds, doubles for the others.
  HostValues Values;
};

llvm::Expected<NpyArray> readNpy(llvm::StringRef Path);
/// Writes Values (already in the element type's range) as an array of type
/// T (bf16 as f4) and the given shape.
llvm::Error writeNpy(llvm::StringRef Path, DType T,
                     llvm::ArrayRef<int64_t> Shape,
                     llvm::ArrayRef<double> Values);
/// The same for values as the interpreter holds them: an integer output's
/// int64_t values are written exactly.
llvm::Error writeNpy(llvm::StringRef Path, DType T,
                     llvm::ArrayRef<int64_t> Shape, const HostValues &Values);

/// Where --run and --interpret find and put a graph's arrays.
struct RunIO {
  /// Inputs: Dir/<graph>/<name>.npy if Dir/<graph> is a directory, else
  /// Dir/<name>.npy. Empty: seeded random values in [-1, 1).
  std::string InputDir;
  /// Outputs: Dir/<name>.npy, or Dir/<graph>/<name>.npy when the module
  /// has several graphs (the driver decides; see outputDirFor). Empty: none.
  std::string OutputDir;
  uint64_t Seed = 0;
  /// --interpret only: the interpreter's memory budget
  /// (--interpret-max-bytes; checkInterpretable).
  uint64_t InterpretMaxBytes = UINT64_MAX;
  /// --run only: check the outputs against the fp64 interpreter (which
  /// takes minutes for prefill-sized GEMMs; PyTorch can be the reference).
  bool Check = true;
  /// --run only: samples of the whole-graph timing (0: no timing).
  unsigned TimeRuns = 0;
  /// --run only: how kernels are compiled (as AutotuneOptions has them).
  unsigned CompileThreads = 0;
  std::string KernelCacheDir;
  /// The runtime library only: the CUDA device to run on (the caller's),
  /// and for a graph of world_size > 1 this process's rank and the
  /// communicator's id (NCCL's unique id, made on rank 0 and handed to
  /// every rank by the caller; docs/RUNTIME.md "Several ranks").
  int Device = 0;
  int Rank = 0;
  std::string CommId;
};

/// Fills Data with every input of G, rounded to its element type: from the
/// input directory, else seeded uniform values in [-1, 1) (one generator
/// for the whole graph, inputs in order).
llvm::Error makeGraphInputs(const Graph &G, const RunIO &IO, ValueData &Data);

/// The file an input or output value V of G is read from or written to.
std::string npyPathFor(llvm::StringRef Dir, const Value &V);

/// Evaluates G with the fp64 interpreter on makeGraphInputs' inputs and
/// writes its outputs (rounded to their element types) to IO.OutputDir if
/// set; one line per output to OS. A graph checkInterpretable refuses
/// (IO.InterpretMaxBytes) is an error before anything is allocated.
llvm::Error interpretGraphToFiles(const Graph &G, const RunIO &IO,
                                  llvm::raw_ostream &OS);

} // namespace mtsched

#endif // MTSCHED_REFERENCE_NPY_H
