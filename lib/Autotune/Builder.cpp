//===- Builder.cpp - Builds a batch of choices ahead of timing ------------===//
#include "mtsched/Autotune/Builder.h"
#include "mtsched/Autotune/Runner.h"
#include <limits>

using namespace mtsched;

Artifact::~Artifact() = default;
Builder::~Builder() = default;
Runner::~Runner() = default;

std::vector<Measurement>
Runner::measureForms(llvm::ArrayRef<std::vector<FormKernel>> Forms,
                     const SustainedProtocol &) {
  Measurement M;
  M.Status = ChoiceStatus::Failed;
  M.Us = std::numeric_limits<double>::infinity();
  M.Message = "this backend does not time forms interleaved";
  return std::vector<Measurement>(Forms.size(), M);
}

namespace {

class TrivialBuilder : public Builder {
public:
  std::vector<BuiltChoices> build(llvm::ArrayRef<BuildInput> Batch) override {
    std::vector<BuiltChoices> Out;
    for (const BuildInput &In : Batch)
      Out.emplace_back(In.N->getChoices().size());
    return Out;
  }
};

} // namespace

std::unique_ptr<Builder> mtsched::createTrivialBuilder() {
  return std::make_unique<TrivialBuilder>();
}
