//===- TimePredictor.cpp - The roofline model behind the interface --------===//
#include "mtsched/Autotune/TimePredictor.h"

using namespace mtsched;

namespace {

class RooflinePredictor : public TimePredictor {
public:
  explicit RooflinePredictor(const DeviceDesc &D) : D(D) {}
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

std::unique_ptr<TimePredictor>
mtsched::createRooflinePredictor(const DeviceDesc &D) {
  return std::make_unique<RooflinePredictor>(D);
}
