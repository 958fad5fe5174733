//===- NcclApi.cpp - NCCL opened at run time ------------------------------===//
#include "mtsched/Backend/Cuda/NcclApi.h"
#include "mtsched/Backend/Cuda/CudaApi.h"
#include "llvm/Support/DynamicLibrary.h"
#include <cstdlib>
#include <mutex>
#include <vector>

using namespace mtsched;
using namespace mtsched::nccl;

std::string NcclApi::errorString(ncclResult_t R) const {
  const char *Text = ncclGetErrorString ? ncclGetErrorString(R) : nullptr;
  return "NCCL error " + std::to_string(R) +
         (Text ? std::string(" (") + Text + ")" : std::string());
}

llvm::Expected<const NcclApi &> nccl::loadNccl() {
  static NcclApi A{};
  static std::string Error;
  static std::once_flag Once;
  std::call_once(Once, [] {
    std::vector<std::string> Names = {"libnccl.so.2", "libnccl.so"};
    if (const char *E = std::getenv("MTSCHED_LIBNCCL"))
      Names.insert(Names.begin(), E);
    llvm::sys::DynamicLibrary Lib;
    std::string Why, Path;
    for (const std::string &N : Names) {
      std::string Msg;
      Lib = llvm::sys::DynamicLibrary::getPermanentLibrary(N.c_str(), &Msg);
      if (Lib.isValid()) {
        Path = N;
        cuda::keepLoaded(N);
        break;
      }
      Why += (Why.empty() ? "" : "; ") + Msg;
    }
    if (!Lib.isValid()) {
      Error = "no NCCL library (libnccl.so.2) could be opened: " + Why;
      return;
    }
    std::string Missing;
    auto Get = [&](auto &Fn, const char *Sym) {
      void *P = Lib.getAddressOfSymbol(Sym);
      Fn = reinterpret_cast<std::remove_reference_t<decltype(Fn)>>(P);
      if (!P)
        Missing += (Missing.empty() ? "" : ", ") + std::string(Sym);
    };
    Get(A.ncclGetVersion, "ncclGetVersion");
    Get(A.ncclGetUniqueId, "ncclGetUniqueId");
    Get(A.ncclCommInitRank, "ncclCommInitRank");
    Get(A.ncclCommDestroy, "ncclCommDestroy");
    Get(A.ncclAllReduce, "ncclAllReduce");
    Get(A.ncclAllGather, "ncclAllGather");
    Get(A.ncclReduceScatter, "ncclReduceScatter");
    Get(A.ncclSend, "ncclSend");
    Get(A.ncclRecv, "ncclRecv");
    Get(A.ncclGroupStart, "ncclGroupStart");
    Get(A.ncclGroupEnd, "ncclGroupEnd");
    Get(A.ncclGetErrorString, "ncclGetErrorString");
    if (!Missing.empty()) {
      Error = Path + " lacks " + Missing;
      return;
    }
    A.ncclGetVersion(&A.Version);
  });
  if (!Error.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(), Error);
  return A;
}
