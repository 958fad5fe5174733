//===- CostModel.cpp - The roofline model behind the interface ------------===//
#include "mtsched/Autotune/CostModel.h"

using namespace mtsched;

namespace {

class RooflineCostModel : public CostModel {
public:
  explicit RooflineCostModel(const DeviceDesc &D) : D(D) {}
  double choiceUs(const Workload &W, const Choice &C,
                  bool Fused) const override {
    return predictChoiceUs(D, W, C, Fused);
  }
  double epilogueUs(const Workload &W) const override {
    return predictEpilogueUs(D, W);
  }
  double chainUs(const EpilogueDesc &E) const override {
    return epilogueTimeUs(D, E);
  }

private:
  DeviceDesc D;
};

} // namespace

std::unique_ptr<CostModel>
mtsched::createRooflineCostModel(const DeviceDesc &D) {
  return std::make_unique<RooflineCostModel>(D);
}
