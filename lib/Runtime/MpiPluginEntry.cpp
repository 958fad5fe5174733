//===- MpiPluginEntry.cpp - libmtsched_mpi.so's entry point ---------------===//
//
// The plugin half of MpiPlugin.h: built into libmtsched_mpi.so with
// MpiCommunicator's files, linked against MPI. Everything else it calls (LLVM's
// Support, Communicator's base parts) is resolved from the executable that
// loads it.
//
//===----------------------------------------------------------------------===//
#include "mtsched/Config/Version.h"
#include "mtsched/Runtime/MpiCommunicator.h"
#include "mtsched/Runtime/MpiPlugin.h"
#include "llvm/Support/Compiler.h"
#include <cstring>

using namespace mtsched;

namespace {

/// MpiCommunicator's static functions behind MpiRuntime's interface.
class PluginRuntime final : public MpiRuntime {
public:
  llvm::Expected<std::unique_ptr<MpiRankCommunicator>> create() override {
    llvm::Expected<std::unique_ptr<MpiCommunicator>> C =
        MpiCommunicator::create();
    if (!C)
      return C.takeError();
    return std::unique_ptr<MpiRankCommunicator>(std::move(*C));
  }
  bool isInitialized() override { return MpiCommunicator::isInitialized(); }
  bool isBroken() override { return MpiCommunicator::isBroken(); }
  bool canFinalize() override { return MpiCommunicator::canFinalize(); }
  bool finalize() override { return MpiCommunicator::finalize(); }
};

} // namespace

extern "C" LLVM_ATTRIBUTE_VISIBILITY_DEFAULT MpiRuntime *
mtsched_mpi_plugin_v1(const char *Version, const char **PluginVersion) {
  *PluginVersion = MTSCHED_VERSION_STRING;
  if (!Version || std::strcmp(Version, MTSCHED_VERSION_STRING) != 0)
    return nullptr;
  // Never destroyed (see MpiRuntime).
  static PluginRuntime *RT = new PluginRuntime;
  return RT;
}
