//===- TimePredictor.h - Predicted times of choices -------------*- C++ -*-===//
//
// What the autotuner asks when it must not, or cannot, measure: the order in
// which --prune-top-k keeps choices, the times it records once ranks stop
// agreeing (degraded runs), the epilogue-as-its-own-kernel estimates of
// select-swiglu, and the simulator backend's timings. The autotuner is handed
// one (explicitly, like its benchmarker); the roofline model of
// mtsched/Runtime/Roofline.h is the built-in one, and a learned or
// calibrated model is another implementation of this interface.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_AUTOTUNE_TIMEPREDICTOR_H
#define MTSCHED_AUTOTUNE_TIMEPREDICTOR_H

#include "mtsched/Autotune/Workload.h"
#include <memory>

namespace mtsched {

class TimePredictor {
public:
  virtual ~TimePredictor() = default;
  /// Microseconds of choice C on workload W (fused with W's epilogue if
  /// Fused); +inf when it cannot run or the model cannot tell.
  virtual double choiceUs(const Workload &W, const Choice &C,
                          bool Fused) const = 0;
  /// Microseconds of W's epilogue run as its own kernel; 0 without one.
  virtual double epilogueUs(const Workload &W) const = 0;
  /// Microseconds of a pointwise / row-reduction chain run as one kernel.
  virtual double chainUs(const EpilogueDesc &E) const = 0;
  /// Microseconds GEMM (or merged SwiGLU) choice C on W (W.Gemm; A is an
  /// RMSNorm's result)
  /// takes beyond its plain time when it runs the norm in its prologue
  /// (select-prologue); +inf when it cannot or the model cannot tell (the
  /// default).
  virtual double prologueUs(const Workload &W, const Choice &C) const;
};

/// The roofline model (docs/SIMULATOR.md) of device D.
std::unique_ptr<TimePredictor> createRooflinePredictor(const DeviceDesc &D);

} // namespace mtsched

#endif // MTSCHED_AUTOTUNE_TIMEPREDICTOR_H
