//===- OpUnits.cpp - Registering every op unit, from Ops.def --------------===//
#include "mtsched/OpUnits/OpUnits.h"
#include <mutex>

using namespace mtsched;

void mtsched::registerAllOpUnits() {
  // The tables are written here only; call_once orders these writes before
  // every caller's later reads (IR/OpUnit.h).
  static std::once_flag Once;
  std::call_once(Once, [] {
#define OP_UNIT(Code, Name, Arity, Results, File) opunits::register##Code();
#include "mtsched/IR/Ops.def"
  });
}
