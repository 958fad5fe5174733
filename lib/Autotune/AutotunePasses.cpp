//===- AutotunePasses.cpp - The passes that drive an autotuner ------------===//
//
// `autotune` (the deferred walk, Autotuner::tuneGraph) and `lower` in
// immediate mode (each node decided as lowering creates it,
// Autotuner::decideNow): the pass manager's way into an Autotuner session.
//
//===----------------------------------------------------------------------===//
#include "mtsched/Autotune/Autotuner.h"
#include "mtsched/Support/Diagnostics.h"

using namespace mtsched;

namespace {

class AutotunePass : public Pass {
public:
  explicit AutotunePass(Autotuner *Session) : Session(Session) {}
  llvm::StringRef getArgument() const override { return "autotune"; }
  llvm::StringRef getDescription() const override {
    return "Pre-sync all ranks once, then benchmark and decide every "
           "multi-template buffer, with and without its epilogue";
  }
  llvm::Error run(Graph &G) override {
    if (!Session)
      return Ctx.Diags->error(G.getLoc(),
                              "the autotune pass needs an autotuner session");
    return Session->tuneGraph(G);
  }

private:
  Autotuner *Session;
};

} // namespace

std::unique_ptr<Pass> mtsched::createAutotunePass(Autotuner *Session) {
  return std::make_unique<AutotunePass>(Session);
}

namespace {

class ImmediateLowerPass : public Pass {
public:
  ImmediateLowerPass(const LoweringOptions &Opts, Autotuner *Session)
      : Lower(createLowerPass(Opts)), Session(Session) {}
  llvm::StringRef getArgument() const override { return "lower"; }
  llvm::StringRef getDescription() const override {
    return Lower->getDescription();
  }
  llvm::Error run(Graph &G) override {
    if (!Session)
      return Ctx.Diags->error(G.getLoc(),
                              "immediate mode needs an autotuner to decide "
                              "nodes after lowering");
    // Only what this pass lowers is decided here: a multi-template buffer
    // already in the input keeps its decision (or is left to `autotune`).
    // Lowering replaces each op in place.
    std::vector<size_t> Lowered;
    for (size_t I = 0; I < G.size(); ++I)
      if (llvm::isa<OpNode>(G.getNodes()[I].get()))
        Lowered.push_back(I);
    Lower->setContext(Ctx);
    if (llvm::Error E = Lower->run(G))
      return E;
    for (size_t I : Lowered)
      if (auto *MTB =
              llvm::dyn_cast<MultiTemplateBufferNode>(G.getNodes()[I].get()))
        if (llvm::Error E = Session->decideNow(G, *MTB))
          return E;
    return llvm::Error::success();
  }

private:
  std::unique_ptr<Pass> Lower;
  Autotuner *Session;
};

} // namespace

std::unique_ptr<Pass>
mtsched::createImmediateLowerPass(const LoweringOptions &Opts,
                                  Autotuner *Session) {
  return std::make_unique<ImmediateLowerPass>(Opts, Session);
}
