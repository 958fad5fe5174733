//===- main.cpp - An out-of-tree user of the installed mtsched ------------===//
//
// Parses and verifies a small graph, prints it back, sizes its fp64
// reference run, lists the passes, and names the version it was built
// against: what a project using find_package(mtsched) can do.
//
//===----------------------------------------------------------------------===//
#include "mtsched/Config/Version.h"
#include "mtsched/Driver/RegisterPasses.h"
#include "mtsched/IR/Parser.h"
#include "mtsched/IR/Printer.h"
#include "mtsched/IR/Verifier.h"
#include "mtsched/Passes/PassRegistry.h"
#include "mtsched/Reference/Interpreter.h"
#include "mtsched/Support/Version.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

static const char *const Input = R"(graph @g(%a: f32[4,8], %b: f32[8,4]) {
  %c = matmul(%a, %b) : f32[4,4]
  %d = relu(%c) : f32[4,4]
  return %d
}
)";

int main() {
  llvm::SourceMgr SM;
  SM.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBuffer(Input, "input.mir"),
                        llvm::SMLoc());
  std::unique_ptr<mtsched::Module> M = mtsched::parseModule(SM);
  if (!M)
    return 1;
  if (llvm::Error E = mtsched::verifyModule(*M, SM)) {
    llvm::errs() << "consumer: " << llvm::toString(std::move(E)) << '\n';
    return 1;
  }
  mtsched::printModule(*M, llvm::outs());
  // mtsched::Reference: what interpreting the graph in fp64 would hold.
  llvm::outs() << "// fp64 reference: "
               << mtsched::interpretBytes(*M->getGraphs().front())
               << " bytes\n";
  // The header and the library must agree on the version.
  if (mtsched::getVersionString() != MTSCHED_VERSION_STRING) {
    llvm::errs() << "consumer: header version " << MTSCHED_VERSION_STRING
                 << ", library version " << mtsched::getVersionString() << '\n';
    return 1;
  }
  mtsched::PassRegistry Registry;
  mtsched::registerAllPasses(Registry);
  llvm::outs() << "// " << Registry.getPasses().size()
               << " passes registered; built against mtsched "
               << mtsched::getVersionString() << '\n';
  return 0;
}
