//===- MpiPlugin.h - MPI ranks from a plugin loaded on demand ---*- C++ -*-===//
//
// The tools link no MPI library. The MPI code (MpiCommunicator) lives in a
// plugin, libmtsched_mpi.so, which is built and linked against MPI and
// opened only when the process is an MPI rank (an MPI launcher's variables
// are set, see RankRunner.cpp), as the CUDA backend opens libcuda, NVRTC,
// cuBLAS and NCCL. A tool therefore runs without MPI installed; only MPI
// ranks need it, and they say clearly what failed to load.
//
// The plugin is looked for, in this order (mpiPluginCandidates()):
//   1. $MTSCHED_MPI_PLUGIN, a path to the plugin: when set, nothing else is
//      tried;
//   2. next to the running executable as installed:
//      <bindir>/../lib/mtsched/libmtsched_mpi.so (the library directory is
//      CMake's CMAKE_INSTALL_LIBDIR, lib/x86_64-linux-gnu under /usr);
//   3. in the build tree's lib/mtsched/, only for an executable inside the
//      build tree it was built in.
//
// The plugin resolves LLVM's and mtsched's symbols (llvm::Error,
// Communicator's vtable) from the executable that loads it, which exports
// them, so that an llvm::Error made in the plugin is the executable's. Its
// entry point checks that both come from the same mtsched version.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_RUNTIME_MPIPLUGIN_H
#define MTSCHED_RUNTIME_MPIPLUGIN_H

#include "mtsched/Runtime/Communicator.h"
#include "llvm/Support/Error.h"
#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace mtsched {

/// An MPI rank's communicator: the Communicator interface, and what the
/// driver needs of MPI ranks beyond it (see MpiCommunicator).
class MpiRankCommunicator : public Communicator {
public:
  /// This rank leaves: every peer is told, and every later operation of
  /// this process returns Failed.
  virtual void depart() = 0;
  /// Whether Rank said it departed (as far as this process has heard).
  virtual bool hasDeparted(int Rank) const = 0;
  /// For a broken run: whether this rank should report (no lower rank that
  /// did not depart says within Grace that it finished).
  virtual bool isLowestFinishedRank(std::chrono::milliseconds Grace) = 0;
  /// Makes the subgroups over Lists (ranks of the world) now, collectively:
  /// every process calls it with the same lists, at start, where every
  /// process is known to be running. createSubgroup then returns them
  /// without waiting (the hierarchical pre-sync's hosts and leaders).
  virtual llvm::Error
  prepareSubgroups(llvm::ArrayRef<std::vector<int>> Lists) = 0;
};

/// The process-wide MPI state the plugin holds (MpiCommunicator's static
/// functions). Owned by the plugin and never destroyed: MPI is finalized
/// explicitly, never by a destructor.
class MpiRuntime {
public:
  /// Initialises MPI on first use; a communicator over MPI_COMM_WORLD.
  virtual llvm::Expected<std::unique_ptr<MpiRankCommunicator>> create() = 0;
  virtual bool isInitialized() = 0;
  virtual bool isBroken() = 0;
  virtual bool canFinalize() = 0;
  virtual bool finalize() = 0;

protected:
  ~MpiRuntime() = default;
};

/// The plugin's file name.
constexpr const char *MpiPluginFileName = "libmtsched_mpi.so";
/// The environment variable that names the plugin to load instead.
constexpr const char *MpiPluginEnvVar = "MTSCHED_MPI_PLUGIN";
/// The plugin's entry point, extern "C":
///   MpiRuntime *mtsched_mpi_plugin_v1(const char *Version,
///                                     const char **PluginVersion);
/// It sets *PluginVersion to the plugin's mtsched version and returns the
/// runtime, or null unless Version (the loader's) is the same: a plugin of
/// another version may disagree about the classes above.
constexpr const char *MpiPluginEntryName = "mtsched_mpi_plugin_v1";
using MpiPluginEntryFn = MpiRuntime *(*)(const char *Version,
                                         const char **PluginVersion);

/// The files loadMpiRuntime() tries, in order (see the file comment).
std::vector<std::string> mpiPluginCandidates();

/// Loads the plugin and MPI (once per process; later calls return the same
/// runtime or the same error). The error names what failed to load.
llvm::Expected<MpiRuntime &> loadMpiRuntime();

/// The runtime if loadMpiRuntime() succeeded, else null; never loads.
MpiRuntime *loadedMpiRuntime();

} // namespace mtsched

#endif // MTSCHED_RUNTIME_MPIPLUGIN_H
