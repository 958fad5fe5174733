//===- UnitTestMain.cpp - main() of the unit tests ------------------------===//
//
// gtest_main's, plus what every tool does before it reads IR: registering
// the ops with their own kernel (OpUnits/OpUnits.h).
//
//===----------------------------------------------------------------------===//
#include "mtsched/OpUnits/OpUnits.h"
#include "gtest/gtest.h"

int main(int argc, char **argv) {
  testing::InitGoogleTest(&argc, argv);
  mtsched::registerAllOpUnits();
  return RUN_ALL_TESTS();
}
