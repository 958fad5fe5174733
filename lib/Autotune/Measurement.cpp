//===- Measurement.cpp - What timing one choice on one rank gave ----------===//
#include "mtsched/Autotune/Measurement.h"

using namespace mtsched;

llvm::StringRef mtsched::choiceStatusName(ChoiceStatus S) {
  switch (S) {
  case ChoiceStatus::Ok:
    return "ok";
  case ChoiceStatus::Failed:
    return "failed";
  case ChoiceStatus::Timeout:
    return "timeout";
  case ChoiceStatus::WrongResult:
    return "wrong_result";
  case ChoiceStatus::Skipped:
    return "skipped";
  }
  return "failed";
}
