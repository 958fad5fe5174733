//===- Measurement.h - What timing one choice on one rank gave --*- C++ -*-===//
//
// A runner's answer for one choice: a time, or a failure as data (the
// choice failed, ran past its timeout, computed a wrong result, or was not
// run). The autotuner agrees these across ranks and decides from them.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_AUTOTUNE_MEASUREMENT_H
#define MTSCHED_AUTOTUNE_MEASUREMENT_H

#include "llvm/ADT/StringRef.h"
#include <string>

namespace mtsched {

enum class ChoiceStatus { Ok, Failed, Timeout, WrongResult, Skipped };
llvm::StringRef choiceStatusName(ChoiceStatus S);

struct Measurement {
  ChoiceStatus Status = ChoiceStatus::Ok;
  /// Median of the timed runs, in microseconds; +inf unless Status is Ok.
  double Us = 0;
  std::string Message;
};

} // namespace mtsched

#endif // MTSCHED_AUTOTUNE_MEASUREMENT_H
