//===- Diagnostics.cpp ----------------------------------------------------===//
#include "mtsched/Passes/Diagnostics.h"

using namespace mtsched;

char ReportedError::ID = 0;

void Diagnostics::print(llvm::SMLoc Loc, llvm::SourceMgr::DiagKind Kind,
                        const llvm::Twine &Msg) {
  std::lock_guard<std::mutex> Lock(Mutex);
  if (Printed.emplace(Loc.getPointer(), Kind, Msg.str()).second)
    SM.PrintMessage(Loc, Kind, Msg);
}

llvm::Error Diagnostics::error(llvm::SMLoc Loc, const llvm::Twine &Msg) {
  print(Loc, llvm::SourceMgr::DK_Error, Msg);
  return llvm::make_error<ReportedError>();
}
