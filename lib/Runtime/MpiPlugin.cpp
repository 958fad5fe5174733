//===- MpiPlugin.cpp - Finding and loading the MPI plugin -----------------===//
//
// The loader half of MpiPlugin.h: it builds without MPI and is in every tool;
// the plugin half (MpiPluginEntry.cpp) is in libmtsched_mpi.so.
//
// MTSCHED_MPI_PLUGIN_RELDIR (the installed plugin directory relative to the
// installed executables) and MTSCHED_MPI_PLUGIN_BUILD_DIR /
// MTSCHED_BINARY_DIR (where the build tree keeps the plugin, and the build
// tree itself) come from lib/Runtime/CMakeLists.txt.
//
//===----------------------------------------------------------------------===//
#include "mtsched/Runtime/MpiPlugin.h"
#include "mtsched/Support/Version.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/DynamicLibrary.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include <cstdlib>
#include <dlfcn.h>

using namespace mtsched;

static llvm::Error err(const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Msg);
}

/// The running executable's real path (/proc/self/exe on Linux).
static std::string executablePath() {
  static int Anchor;
  return llvm::sys::fs::getMainExecutable("mtsched", &Anchor);
}

/// Whether Path is Dir or lies below it, both made real (symlinks resolved).
static bool isInside(llvm::StringRef Path, llvm::StringRef Dir) {
  llvm::SmallString<256> RealDir;
  if (Path.empty() || llvm::sys::fs::real_path(Dir, RealDir))
    return false;
  return Path == RealDir || Path.starts_with((RealDir + "/").str());
}

std::vector<std::string> mtsched::mpiPluginCandidates() {
  if (const char *E = std::getenv(MpiPluginEnvVar); E && *E)
    return {E};
  std::vector<std::string> Out;
  std::string Exe = executablePath();
  if (!Exe.empty()) {
    llvm::SmallString<256> P(llvm::sys::path::parent_path(Exe));
    llvm::sys::path::append(P, MTSCHED_MPI_PLUGIN_RELDIR, MpiPluginFileName);
    llvm::sys::path::remove_dots(P, /*remove_dot_dot=*/true);
    Out.push_back(std::string(P));
  }
  // A build tree's tools find their plugin without being installed; an
  // installed or copied tool never looks into a build tree.
  if (isInside(Exe, MTSCHED_BINARY_DIR)) {
    llvm::SmallString<256> P(MTSCHED_MPI_PLUGIN_BUILD_DIR);
    llvm::sys::path::append(P, MpiPluginFileName);
    if (!llvm::is_contained(Out, std::string(P)))
      Out.push_back(std::string(P));
  }
  return Out;
}

/// Loads Path and asks its entry point for the runtime.
static llvm::Expected<MpiRuntime &> loadFrom(const std::string &Path) {
  std::string Msg;
  llvm::sys::DynamicLibrary Lib =
      llvm::sys::DynamicLibrary::getPermanentLibrary(Path.c_str(), &Msg);
  // dlopen's message names the file that failed: the plugin itself, or the
  // MPI library it needs (libmpi.so.40: cannot open shared object file).
  if (!Lib.isValid())
    return err(Msg);
  // LLVM closes its "permanent" libraries at exit; MPI must stay mapped
  // until the process is gone (its exit handlers run after ours).
  ::dlopen(Path.c_str(), RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
  auto Entry = reinterpret_cast<MpiPluginEntryFn>(
      Lib.getAddressOfSymbol(MpiPluginEntryName));
  if (!Entry)
    return err(Path + ": not an mtsched MPI plugin (no " + MpiPluginEntryName +
               ")");
  const char *PluginVersion = "?";
  std::string Version = getVersionString().str();
  MpiRuntime *RT = Entry(Version.c_str(), &PluginVersion);
  if (!RT)
    return err(Path + ": built for mtsched " + PluginVersion + ", not " +
               Version);
  return *RT;
}

namespace {
struct LoadResult {
  MpiRuntime *RT = nullptr;
  std::string Error;
};
} // namespace

static LoadResult &loadOnce() {
  static LoadResult R = [] {
    LoadResult Out;
    std::vector<std::string> Candidates = mpiPluginCandidates();
    const char *Env = std::getenv(MpiPluginEnvVar);
    bool FromEnv = Env && *Env;
    for (const std::string &Path : Candidates) {
      // An explicit path is loaded as given, so its error is dlopen's own.
      if (!FromEnv && !llvm::sys::fs::exists(Path))
        continue;
      llvm::Expected<MpiRuntime &> RT = loadFrom(Path);
      if (RT) {
        Out.RT = &*RT;
        return Out;
      }
      Out.Error = toString(RT.takeError());
      return Out;
    }
    Out.Error = std::string("no MPI plugin (") + MpiPluginFileName +
                ") found; looked for " + llvm::join(Candidates, ", ");
    return Out;
  }();
  return R;
}

/// Set once loadMpiRuntime() succeeded.
static MpiRuntime *Loaded = nullptr;

llvm::Expected<MpiRuntime &> mtsched::loadMpiRuntime() {
  LoadResult &R = loadOnce();
  if (!R.RT)
    return err(R.Error);
  Loaded = R.RT;
  return *R.RT;
}

MpiRuntime *mtsched::loadedMpiRuntime() { return Loaded; }
