//===- AutotunerForms.cpp - Whole forms timed at sustained load -----------===//
//
// Autotuner::measureFormsUs: decided nodes grouped into forms (a merged
// SwiGLU kernel, or the two GEMMs and the epilogue it replaces) and timed
// against each other by the measurer at sustained load, for select-swiglu
// (docs/PASSES.md, "Long forms").
//
//===----------------------------------------------------------------------===//
#include "AutotunerImpl.h"
#include <limits>

using namespace mtsched;

static constexpr double Inf = std::numeric_limits<double>::infinity();

std::vector<Measurement>
Autotuner::measureFormsUs(const Graph &G,
                          llvm::ArrayRef<std::vector<FormPart>> Forms,
                          const SustainedProtocol &Protocol) {
  Impl &I = *P;
  Measurement Bad;
  Bad.Status = ChoiceStatus::Failed;
  Bad.Us = Inf;
  std::vector<std::vector<FormKernel>> Kernels;
  std::vector<std::string> Why(Forms.size());
  for (size_t F = 0; F < Forms.size(); ++F) {
    std::vector<FormKernel> &Ks = Kernels.emplace_back();
    for (const FormPart &Part : Forms[F]) {
      const MultiTemplateBufferNode &N = I.measured(*Part.N);
      FormKernel K{&N, describeNode(I.M, G, *Part.N), nullptr, Part.Fused};
      if (!Part.Epilogue) {
        for (const Choice &C : N.getChoices())
          if (C.Name == Part.N->getDecision())
            K.C = &C;
        if (!K.C)
          Why[F] = "'%" + Part.N->getName() + "' is not decided";
      }
      Ks.push_back(std::move(K));
    }
  }
  std::vector<Measurement> Out(Forms.size(), Bad);
  if (llvm::any_of(Why, [](const std::string &W) { return !W.empty(); })) {
    // Every rank sees the same graph: none measures.
    for (size_t F = 0; F < Forms.size(); ++F)
      Out[F].Message = Why[F].empty() ? "another form cannot run" : Why[F];
    return Out;
  }
  // Outside a node's finalization: no cache entry is being replayed.
  I.Store.beginNode();
  std::vector<AgreedMeasurement> A = I.Measurer.measureForms(Kernels, Protocol);
  if (A.empty())
    return {};
  for (size_t F = 0; F < Forms.size(); ++F)
    Out[F] = Measurement{A[F].Status, A[F].Us, A[F].Message};
  return Out;
}

unsigned Autotuner::getSwiGluSustainedUs() const {
  return P->Fusion.SwiGluSustainedUs;
}
