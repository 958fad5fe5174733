//===- Cudnn.cpp - cuDNN, opened at run time ------------------------------===//
#include "Cudnn.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/DynamicLibrary.h"
#include "llvm/Support/Process.h"
#include <mutex>

using namespace mtsched;
using namespace mtsched::cudnn;

static llvm::Error err(const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Msg);
}

/// Opens the first library that loads and has every entry point; Api::Path
/// empty and Why set otherwise.
static void open(Api &A, std::string &Why) {
  std::vector<std::string> Paths;
  if (std::optional<std::string> Env =
          llvm::sys::Process::GetEnv("MTSCHED_CUDNN_LIB")) {
    // Turned off: extern.cudnn fails everywhere, as without cuDNN.
    if (*Env == "off") {
      Why = "turned off by MTSCHED_CUDNN_LIB=off";
      return;
    }
    Paths.push_back(*Env);
  }
  Paths.push_back("libcudnn.so.9");
  Paths.push_back("libcudnn.so.8");
  for (const std::string &Path : Paths) {
    std::string LoadErr;
    llvm::sys::DynamicLibrary Lib =
        llvm::sys::DynamicLibrary::getPermanentLibrary(Path.c_str(), &LoadErr);
    if (!Lib.isValid()) {
      Why += (Why.empty() ? "" : "; ") + Path + ": " +
             (LoadErr.empty() ? "cannot be loaded" : LoadErr);
      continue;
    }
    std::string Missing;
    auto Get = [&](auto &Fn, const char *Name) {
      Fn = reinterpret_cast<std::remove_reference_t<decltype(Fn)>>(
          Lib.getAddressOfSymbol(Name));
      if (!Fn && Missing.empty())
        Missing = Name;
    };
    Get(A.Create, "cudnnCreate");
    Get(A.SetStream, "cudnnSetStream");
    Get(A.GetErrorString, "cudnnGetErrorString");
    Get(A.GetVersion, "cudnnGetVersion");
    Get(A.CreateTensorDescriptor, "cudnnCreateTensorDescriptor");
    Get(A.SetTensor4dDescriptor, "cudnnSetTensor4dDescriptor");
    Get(A.CreateFilterDescriptor, "cudnnCreateFilterDescriptor");
    Get(A.SetFilter4dDescriptor, "cudnnSetFilter4dDescriptor");
    Get(A.CreateConvolutionDescriptor, "cudnnCreateConvolutionDescriptor");
    Get(A.DestroyTensorDescriptor, "cudnnDestroyTensorDescriptor");
    Get(A.DestroyFilterDescriptor, "cudnnDestroyFilterDescriptor");
    Get(A.DestroyConvolutionDescriptor, "cudnnDestroyConvolutionDescriptor");
    Get(A.SetConvolution2dDescriptor, "cudnnSetConvolution2dDescriptor");
    Get(A.SetConvolutionGroupCount, "cudnnSetConvolutionGroupCount");
    Get(A.SetConvolutionMathType, "cudnnSetConvolutionMathType");
    Get(A.GetConvolutionForwardAlgorithm_v7,
        "cudnnGetConvolutionForwardAlgorithm_v7");
    Get(A.GetConvolutionForwardWorkspaceSize,
        "cudnnGetConvolutionForwardWorkspaceSize");
    Get(A.ConvolutionForward, "cudnnConvolutionForward");
    Get(A.AddTensor, "cudnnAddTensor");
    if (!Missing.empty()) {
      Why += (Why.empty() ? "" : "; ") + Path + ": no symbol " + Missing;
      continue;
    }
    A.Path = Path;
    return;
  }
}

llvm::Expected<const Api &> cudnn::load() {
  static Api A;
  static std::string Why;
  static std::once_flag Once;
  std::call_once(Once, [] { open(A, Why); });
  if (A.Path.empty())
    return err("cuDNN cannot be loaded (" + Why + ")");
  return A;
}

std::string cudnn::statusText(const Api &A, Status S) {
  const char *Text = A.GetErrorString ? A.GetErrorString(S) : nullptr;
  return std::string(Text ? Text : "cuDNN status") + " (" + std::to_string(S) +
         ")";
}

llvm::Expected<Handle> cudnn::handleFor(const Api &A, void *Stream) {
  static std::mutex Mu;
  static llvm::DenseMap<void *, Handle> Handles;
  std::lock_guard<std::mutex> Lock(Mu);
  auto [It, New] = Handles.try_emplace(Stream, nullptr);
  if (!New)
    return It->second;
  Handle H = nullptr;
  if (Status S = A.Create(&H)) {
    Handles.erase(It);
    return err("cudnnCreate failed: " + statusText(A, S));
  }
  if (Status S = A.SetStream(H, Stream)) {
    Handles.erase(It);
    return err("cudnnSetStream failed: " + statusText(A, S));
  }
  It->second = H;
  return H;
}
