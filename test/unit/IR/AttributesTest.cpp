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
  EXPECT_EQ(D.getString("a").value(), "x");
  EXPECT_FALSE(D.getInt("a").has_value());
}

TEST(AttributesTest, FloatsPrintIntegralValuesInFull) {
  // %g alone would print these with an exponent (1e+01), which reads back
  // the same but is not what a person writes.
  EXPECT_EQ(str(Attribute::getFloat(10)), "10.0");
  EXPECT_EQ(str(Attribute::getFloat(-1500)), "-1500.0");
  EXPECT_EQ(str(Attribute::getFloat(1e15)), "1000000000000000.0");
  EXPECT_EQ(str(Attribute::getFloat(1e16)), "1e+16");
  EXPECT_EQ(str(Attribute::getFloat(1.5e300)), "1.5e+300");
  EXPECT_EQ(str(Attribute::getFloat(0.0001)), "0.0001");
  EXPECT_EQ(str(Attribute::getFloat(-0.0)), "-0.0");
  EXPECT_EQ(str(Attribute::getFloat(-INFINITY)), "-inf");
}

TEST(AttributesTest, FloatsReadBackExactly) {
  for (double V : {0.1, 1.0 / 3.0, 2.0 / 3.0, 1e-300, 4.9406564584124654e-324,
                   1.7976931348623157e308, 123456.789, 9007199254740993.0,
                   -2.5e-7, 6.02214076e23}) {
    std::string S = str(Attribute::getFloat(V));
    EXPECT_EQ(std::strtod(S.c_str(), nullptr), V) << S;
    EXPECT_NE(S.find_first_of(".e"), std::string::npos) << S;
  }
}

TEST(AttributesTest, EveryKindPrints) {
  EXPECT_EQ(str(Attribute::getInt(-42)), "-42");
  EXPECT_EQ(str(Attribute::getInt(INT64_MIN)), "-9223372036854775808");
  EXPECT_EQ(str(Attribute::getBool(true)), "true");
  EXPECT_EQ(str(Attribute::getBool(false)), "false");
  EXPECT_EQ(str(Attribute::getString("a\"b\\c\nd\te\x01\xff")),
            "\"a\\\"b\\\\c\\nd\\te\\001\\377\"");
  EXPECT_EQ(str(Attribute::getList({})), "[]");
  EXPECT_EQ(str(Attribute::getList(
                {Attribute::getInt(1),
                 Attribute::getList(
                     {Attribute::getFloat(0.5), Attribute::getString("x")})})),
            "[1, [0.5, \"x\"]]");
}

TEST(AttributesTest, KindsAndAccessors) {
  Attribute I = Attribute::getInt(7);
  EXPECT_TRUE(I.isInt());
  EXPECT_FALSE(I.isFloat());
  EXPECT_EQ(I.getKind(), Attribute::Kind::Int);
  EXPECT_EQ(I.getNumber(), 7.0);
  Attribute F = Attribute::getFloat(0.25);
  EXPECT_TRUE(F.isFloat());
  EXPECT_EQ(F.getNumber(), 0.25);
  EXPECT_TRUE(Attribute::getString("s").isString());
  EXPECT_TRUE(Attribute::getBool(false).isBool());
  EXPECT_TRUE(Attribute::getList({}).isList());
}

TEST(AttributesTest, EqualityComparesKindAndValue) {
  // An int and a bool share their storage but are different attributes.
  EXPECT_NE(Attribute::getInt(1), Attribute::getBool(true));
  EXPECT_NE(Attribute::getInt(1), Attribute::getFloat(1.0));
  EXPECT_EQ(Attribute::getString("a"), Attribute::getString("a"));
  EXPECT_NE(Attribute::getString("a"), Attribute::getString("b"));
  EXPECT_EQ(Attribute::getList({Attribute::getInt(1)}),
            Attribute::getList({Attribute::getInt(1)}));
  EXPECT_NE(Attribute::getList({Attribute::getInt(1)}),
            Attribute::getList({Attribute::getInt(1), Attribute::getInt(2)}));
}

TEST(AttributesTest, DictLookups) {
  AttrDict D;
  EXPECT_TRUE(D.empty());
  std::string S;
  llvm::raw_string_ostream OS(S);
  D.print(OS);
  EXPECT_EQ(OS.str(), "") << "an empty dictionary prints nothing";

  D.set("dim", Attribute::getInt(-1));
  D.set("group", Attribute::getString("tp"));
  EXPECT_EQ(D.size(), 2u);
  EXPECT_TRUE(D.contains("dim"));
  EXPECT_FALSE(D.contains("keepdim"));
  EXPECT_EQ(D.get("keepdim"), nullptr);
  EXPECT_EQ(D.getInt("dim").value(), -1);
  // Typed lookups of the wrong kind give None rather than a wrong value.
  EXPECT_FALSE(D.getString("dim").has_value());
  EXPECT_FALSE(D.getInt("group").has_value());
  EXPECT_FALSE(D.getInt("missing").has_value());

  AttrDict Same;
  Same.set("dim", Attribute::getInt(-1));
  Same.set("group", Attribute::getString("tp"));
  EXPECT_TRUE(D == Same);
  AttrDict Reordered;
  Reordered.set("group", Attribute::getString("tp"));
  Reordered.set("dim", Attribute::getInt(-1));
  EXPECT_FALSE(D == Reordered) << "order is part of a dictionary";
}
