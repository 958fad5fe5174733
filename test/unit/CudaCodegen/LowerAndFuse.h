//===- LowerAndFuse.h - Graphs lowered for codegen tests --------*- C++ -*-===//
//
// What the code generator's tests start from: IR text parsed, verified and
// lowered (the template tests: the node a kernel is generated for), or
// lowered and fused as mtsched-opt's default pipeline would (the GEMM
// tests, CodegenTest.cpp and WgmmaCodegenTest.cpp), and choices known only
// by name.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_TEST_UNIT_CUDACODEGEN_LOWERANDFUSE_H
#define MTSCHED_TEST_UNIT_CUDACODEGEN_LOWERANDFUSE_H

#include "IRTestUtils.h"
#include "mtsched/Lowering/Lowering.h"
#include "mtsched/Passes/Pass.h"
#include "mtsched/Schedule/Fusion.h"
#include "mtsched/Support/Diagnostics.h"
#include "llvm/Support/SourceMgr.h"
#include <memory>

namespace mtsched {
namespace test {

struct Parsed {
  llvm::SourceMgr SM;
  std::unique_ptr<Module> M;
};

/// Parses and verifies Text, then lowers its first graph; null (and the
/// lowering's error dropped) if either fails.
inline std::unique_ptr<Parsed> lowered(llvm::StringRef Text,
                                       llvm::StringRef Name) {
  auto P = std::make_unique<Parsed>();
  P->M = test::parseAndVerify(P->SM, Text, Name);
  if (!P->M)
    return nullptr;
  if (llvm::Error E =
          createLowerPass(LoweringOptions())->run(*P->M->getGraphs()[0])) {
    llvm::consumeError(std::move(E));
    return nullptr;
  }
  return P;
}

/// The first node of P's first graph: the template node a one-op graph
/// lowers to.
inline const MultiTemplateBufferNode &firstNode(const Parsed &P) {
  return *llvm::cast<MultiTemplateBufferNode>(
      P.M->getGraphs()[0]->getNodes()[0].get());
}

/// Parses, verifies, lowers and fuses Text; null if it is not a valid graph
/// (lit inputs include negative tests).
inline std::unique_ptr<Parsed> lowerAndFuse(llvm::StringRef Text,
                                            llvm::StringRef Name) {
  auto P = std::make_unique<Parsed>();
  P->SM.setDiagHandler([](const llvm::SMDiagnostic &, void *) {});
  P->M = test::parseAndVerify(P->SM, Text, Name);
  if (!P->M)
    return nullptr;
  LoweringOptions LO;
  FusionOptions FO;
  // A case lowering refuses (a batched swiglu has no template on the
  // default target) reports through these, silenced by the handler above,
  // and is left out of the corpus.
  Diagnostics Diags(P->SM);
  PassContext Ctx;
  Ctx.M = P->M.get();
  Ctx.Diags = &Diags;
  for (auto &G : P->M->getGraphs()) {
    auto Lower = createLowerPass(LO);
    auto Fuse = createFusePass(FO);
    Lower->setContext(Ctx);
    Fuse->setContext(Ctx);
    if (llvm::Error E = Lower->run(*G)) {
      llvm::consumeError(std::move(E));
      return nullptr;
    }
    if (llvm::Error E = Fuse->run(*G)) {
      llvm::consumeError(std::move(E));
      return nullptr;
    }
  }
  return P;
}

/// A choice that has only a name, for gemmTileOf.
inline Choice named(const char *Name) {
  Choice C;
  C.Name = Name;
  return C;
}

} // namespace test
} // namespace mtsched

#endif // MTSCHED_TEST_UNIT_CUDACODEGEN_LOWERANDFUSE_H
