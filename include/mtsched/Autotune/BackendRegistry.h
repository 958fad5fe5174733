//===- BackendRegistry.h - The backends choices can be timed on -*- C++ -*-===//
//
// A backend is a way of timing choices: a Builder and a Runner (held by a
// Benchmarker) with a name (`--backend`), a version for cache keys and a
// factory. Backends live in lib/Backend/<Name> and are listed in one
// BackendRegistry (mtsched/Backend/Backends.h); the autotuner, the driver
// and the tools find them there by name, so nothing above a backend names
// its classes or downcasts its builder or runner.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_AUTOTUNE_BACKENDREGISTRY_H
#define MTSCHED_AUTOTUNE_BACKENDREGISTRY_H

#include "mtsched/Autotune/AutotuneOptions.h"
#include "mtsched/Autotune/Benchmarker.h"
#include "mtsched/Reference/Npy.h"
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace mtsched {

class Communicator;

/// A decided graph made ready to run on buffers its caller owns (the
/// runtime library, include/mtsched/RuntimeApi/mtsched_runtime.h): kernels
/// compiled and intermediates allocated once, then run as often as asked.
class PreparedGraph {
public:
  virtual ~PreparedGraph();
  /// Runs the graph once on the device: Inputs[i] / Outputs[i] are device
  /// pointers to the graph's i-th input / output (dense, in its element
  /// type), Stream the stream to run on (null: the default stream).
  virtual llvm::Error run(const void *const *Inputs, void *const *Outputs,
                          void *Stream) = 0;
  /// A counter of what preparing and running did ("kernels_cached",
  /// "captures", ...; docs/RUNTIME.md lists them), or -1 for a name this
  /// graph does not keep: how a caller sees that a warm start compiled
  /// nothing, or that a binding keeps being staged.
  virtual int64_t stat(llvm::StringRef Name) const {
    (void)Name;
    return -1;
  }
};

struct BackendInfo {
  using CreateFn = std::function<llvm::Expected<std::unique_ptr<Benchmarker>>(
      const AutotuneOptions &Opts, int Rank, Communicator &Comm)>;
  using ProbeFn = std::function<llvm::Error(const AutotuneOptions &Opts)>;
  using RunGraphFn = std::function<llvm::Error(const Graph &G, const RunIO &IO,
                                               llvm::raw_ostream &OS)>;
  using DumpKernelsFn = std::function<llvm::Expected<unsigned>(
      const Module &M, const Graph &G, llvm::StringRef Dir,
      std::vector<std::string> &Missing)>;
  using PrepareGraphFn =
      std::function<llvm::Expected<std::unique_ptr<PreparedGraph>>(
          const Module &M, const Graph &G, const RunIO &IO)>;
  using CountDevicesFn = std::function<llvm::Expected<int>()>;
  using MakeCommIdFn = std::function<llvm::Expected<std::string>()>;
  using PeerOrdinalsFn =
      std::function<llvm::Expected<std::vector<int>>(int Ordinal)>;

  /// What `--backend` and the report call it.
  std::string Name;
  /// One line for `--help` and error messages.
  std::string Description;
  /// The version the created backend will report (part of every cache
  /// key), known without creating it: a lazy backend announces it.
  std::string Version;
  /// Creates the backend for one rank. Comm is the rank's communicator
  /// (collectives over several devices need it); it and Opts must outlive
  /// the backend. The error says why the backend cannot run here.
  CreateFn Create;
  /// Checks that the backend can run here now, as `--backend=auto` must
  /// know (it may open the device). Null: it always can.
  ProbeFn Probe;
  /// `--backend=auto` tries the backends that set this, in registration
  /// order, and takes the first that can run; else the default backend.
  bool TriedByAuto = false;
  /// `--run`: executes a decided graph on this backend's device, checks
  /// every output against the fp64 reference, writes IO's output files and
  /// times it, a line per result on OS. Null: the backend has no device to
  /// run a graph on (the simulator only predicts times).
  RunGraphFn RunGraph;
  /// `--dump-kernels`: writes the source of every kernel the decided graph
  /// runs to Dir and returns how many; what has no kernel is named in
  /// Missing. Null: the backend generates no kernels.
  DumpKernelsFn DumpKernels;
  /// The runtime library: prepares a decided graph to run on the caller's
  /// device buffers and stream (IO gives the kernel cache and compile
  /// threads). Null: this backend cannot (yet) run on caller's buffers.
  PrepareGraphFn PrepareGraph;
  /// A new id for the communicator of a graph of several ranks that the
  /// runtime library prepares (NCCL's unique id on cuda), made on one rank
  /// and given to every rank's PrepareGraph in RunIO::CommId. Null: this
  /// backend runs graphs of one rank only.
  MakeCommIdFn MakeCommId;
  /// The devices the backend's collectives run on, for rank placement and
  /// topology discovery (the driver asks, naming no backend): how many
  /// there are, and the ones device Ordinal reaches directly (itself
  /// included). Null: the backend uses no device, and a simulated run is
  /// the same on every machine.
  CountDevicesFn CountDevices;
  PeerOrdinalsFn PeerOrdinals;
};

class BackendRegistry {
public:
  /// Adds B; the first backend added is the default (`auto`'s fallback).
  void add(BackendInfo B);
  /// The backend called Name, or null.
  const BackendInfo *lookup(llvm::StringRef Name) const;
  /// "sim, cuda, auto": the names `--backend` accepts.
  std::string names() const;
  /// The backend Opts.Backend names. For `auto`, the first TriedByAuto
  /// backend that can be created and probed, else the default; which one
  /// and why is said once per process on stderr.
  llvm::Expected<const BackendInfo &>
  resolve(const AutotuneOptions &Opts) const;
  /// The backend that runs decided graphs (`--run`): the first registered
  /// one with RunGraph, or null if none has.
  const BackendInfo *executor() const;
  /// The backend whose kernels `--dump-kernels` writes: the first
  /// registered one with DumpKernels, or null.
  const BackendInfo *kernelDumper() const;
  /// Creates the backend Opts.Backend names for one rank, right away.
  llvm::Expected<std::unique_ptr<Benchmarker>>
  create(const AutotuneOptions &Opts, int Rank, Communicator &Comm) const;

private:
  std::vector<BackendInfo> Backends;
};

} // namespace mtsched

#endif // MTSCHED_AUTOTUNE_BACKENDREGISTRY_H
