#include "mtsched/IR/Attributes.h"
#include "llvm/Support/raw_ostream.h"
#include "gtest/gtest.h"
#include <cmath>

using namespace mtsched;

static std::string str(const Attribute &A) {
  std::string S;
  llvm::raw_string_ostream OS(S);
  A.print(OS);
  return OS.str();
}

TEST(AttributesTest, FloatsPrintShortestAndStayFloats) {
  EXPECT_EQ(str(Attribute::getFloat(0.1)), "0.1");
  EXPECT_EQ(str(Attribute::getFloat(2)), "2.0");
  EXPECT_EQ(str(Attribute::getFloat(1e-5)), "1e-05");
  EXPECT_EQ(str(Attribute::getFloat(INFINITY)), "inf");
  double Third = 1.0 / 3.0;
  EXPECT_EQ(std::strtod(str(Attribute::getFloat(Third)).c_str(), nullptr),
            Third);
}

TEST(AttributesTest, DictKeepsInsertionOrderAndReplacesInPlace) {
  AttrDict D;
  D.set("b", Attribute::getInt(1));
  D.set("a", Attribute::getString("x"));
  D.set("b", Attribute::getBool(true));
  std::string S;
  llvm::raw_string_ostream OS(S);
  D.print(OS);
  EXPECT_EQ(OS.str(), " {b = true, a = \"x\"}");
  EXPECT_EQ(D.getString("a").getValue(), "x");
  EXPECT_FALSE(D.getInt("a").hasValue());
}
