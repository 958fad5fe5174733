//===- Fp8Test.cpp - fp8 rounding of the interpreter ----------------------===//
#include "mtsched/Reference/Interpreter.h"
#include "gtest/gtest.h"
#include <cmath>

using namespace mtsched;

namespace {

struct Format {
  DType T;
  double Max;
  unsigned MaxCode;
};

const Format Formats[] = {{DType::F8E4M3, 448, 0x7e},
                          {DType::F8E5M2, 57344, 0x7b}};

bool isNanCode(unsigned C, DType T) {
  unsigned Em = C & 0x7f;
  return T == DType::F8E4M3 ? Em == 0x7f : Em > 0x7c;
}

} // namespace

TEST(Fp8Test, EveryFiniteCodeRoundTrips) {
  for (const Format &F : Formats)
    for (unsigned C = 0; C < 256; ++C) {
      float V = f8ToFloat(uint8_t(C), F.T);
      if (isNanCode(C, F.T)) {
        EXPECT_TRUE(std::isnan(V)) << C;
        continue;
      }
      if (std::isinf(V))
        continue; // e5m2's infinities saturate (below)
      EXPECT_EQ(floatToF8(V, F.T), C) << dtypeName(F.T).str() << " " << V;
      EXPECT_LE(std::fabs(V), F.Max);
    }
}

TEST(Fp8Test, RoundsToNearestEvenAndSaturates) {
  for (const Format &F : Formats) {
    auto R = [&](double X) { return roundTo(X, F.T); };
    EXPECT_EQ(R(F.Max), F.Max);
    EXPECT_EQ(R(F.Max * 1.01), F.Max);
    EXPECT_EQ(R(1e30), F.Max);
    EXPECT_EQ(R(-INFINITY), -F.Max);
    EXPECT_EQ(R(INFINITY), F.Max);
    EXPECT_TRUE(std::isnan(R(NAN)));
    EXPECT_EQ(floatToF8(float(F.Max), F.T), F.MaxCode);
    // Every midpoint between neighbouring positive codes goes to the code
    // with the even mantissa (the even code).
    for (unsigned C = 0; C < F.MaxCode; ++C) {
      double Lo = f8ToFloat(uint8_t(C), F.T),
             Hi = f8ToFloat(uint8_t(C + 1), F.T);
      double Mid = (Lo + Hi) / 2;
      EXPECT_EQ(floatToF8(float(Mid), F.T), (C % 2 == 0) ? C : C + 1)
          << dtypeName(F.T).str() << " between " << Lo << " and " << Hi;
      EXPECT_EQ(floatToF8(float(Lo + (Hi - Lo) / 4), F.T), C);
      EXPECT_EQ(floatToF8(float(Hi - (Hi - Lo) / 4), F.T), C + 1);
      EXPECT_EQ(floatToF8(float(-Mid), F.T), ((C % 2 == 0) ? C : C + 1) | 0x80);
    }
  }
  // e4m3's smallest subnormal is 2^-9: half of it rounds to zero (even).
  EXPECT_EQ(roundTo(std::ldexp(1.0, -10), DType::F8E4M3), 0.0);
  EXPECT_EQ(roundTo(std::ldexp(3.0, -10), DType::F8E4M3), std::ldexp(1.0, -8));
}
