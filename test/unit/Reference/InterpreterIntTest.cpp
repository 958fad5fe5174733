//===- InterpreterIntTest.cpp - Exact integers and the size guard ---------===//
#include "mtsched/IR/Parser.h"
#include "mtsched/Reference/Interpreter.h"
#include "mtsched/Reference/Npy.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/SourceMgr.h"
#include "gtest/gtest.h"
#include <cmath>
#include <limits>

using namespace mtsched;

namespace {

constexpr int64_t I64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t I64Min = std::numeric_limits<int64_t>::min();

struct Parsed {
  llvm::SourceMgr SM;
  std::unique_ptr<Module> M;
  const Graph &graph() const { return *M->getGraphs().front(); }
};

std::unique_ptr<Parsed> parse(const char *IR) {
  auto P = std::make_unique<Parsed>();
  P->SM.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(IR, "t.mir"),
                           llvm::SMLoc());
  P->M = parseModule(P->SM);
  return P;
}

} // namespace

TEST(InterpreterInt, WrapKeepsTheLowBitsOfI32) {
  EXPECT_EQ(wrapInt(int64_t(INT32_MAX) + 1, DType::I32), INT32_MIN);
  EXPECT_EQ(wrapInt((int64_t(1) << 32) + 5, DType::I32), 5);
  EXPECT_EQ(wrapInt(-1, DType::I32), -1);
  EXPECT_EQ(wrapInt(I64Max, DType::I64), I64Max);
}

TEST(InterpreterInt, DoubleToIntTruncatesAndWraps) {
  EXPECT_EQ(doubleToInt(3.9, DType::I32), 3);
  EXPECT_EQ(doubleToInt(-3.9, DType::I32), -3);
  EXPECT_EQ(doubleToInt(NAN, DType::I64), 0);
  EXPECT_EQ(doubleToInt(INFINITY, DType::I32), 0);
  // 2^31 and 2^63 wrap to the most negative value, -2^64 - 2 to -2.
  EXPECT_EQ(doubleToInt(2147483648.0, DType::I32), INT32_MIN);
  EXPECT_EQ(doubleToInt(9223372036854775808.0, DType::I64), I64Min);
  EXPECT_EQ(doubleToInt(-18446744073709551616.0, DType::I64), 0);
  EXPECT_EQ(doubleToInt(1e300, DType::I64), 0); // a multiple of 2^64
  EXPECT_EQ(doubleToInt(-0.5, DType::I64), 0);
}

TEST(InterpreterInt, I64NpyRoundTripsExactly) {
  llvm::SmallString<128> Path;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("int", "npy", Path));
  std::vector<int64_t> V = {9007199254740993, I64Max, I64Min, -1};
  ASSERT_FALSE(bool(writeNpy(Path, DType::I64, {4}, HostValues(V))));
  llvm::Expected<NpyArray> A = readNpy(Path);
  ASSERT_TRUE(bool(A)) << llvm::toString(A.takeError());
  ASSERT_TRUE(A->Values.isInt());
  EXPECT_EQ(A->Values.ints(), V);
  // i32 files hold the wrapped values.
  ASSERT_FALSE(bool(
      writeNpy(Path, DType::I32, {2},
               HostValues(std::vector<int64_t>{int64_t(INT32_MAX) + 1, 7}))));
  A = readNpy(Path);
  ASSERT_TRUE(bool(A)) << llvm::toString(A.takeError());
  EXPECT_EQ(A->Values.ints(), (std::vector<int64_t>{INT32_MIN, 7}));
  llvm::sys::fs::remove(Path);
}

TEST(InterpreterInt, ScatterAddAndCumsumWrapAtI32) {
  auto P = parse(R"(graph @g(%d: i32[2], %i: i64[3], %s: i32[3]) {
  %a = scatter(%d, %i, %s) {dim = 0, reduce = "add"} : i32[2]
  %c = cumsum(%s) : i32[3]
  return %a, %c
}
)");
  ASSERT_TRUE(P->M);
  const Graph &G = P->graph();
  ValueData Data;
  Data[G.getInputs()[0].get()] = HostValues(std::vector<int64_t>{INT32_MAX, 0});
  Data[G.getInputs()[1].get()] = HostValues(std::vector<int64_t>{0, 0, 1});
  Data[G.getInputs()[2].get()] =
      HostValues(std::vector<int64_t>{INT32_MAX, 2, -1});
  llvm::Error E = interpretGraph(G, Data);
  ASSERT_FALSE(bool(E)) << llvm::toString(std::move(E));
  const auto &Nodes = G.getNodes();
  // INT32_MAX + INT32_MAX + 2 wraps to 0.
  EXPECT_EQ(Data[Nodes[0]->getResult()].ints(), (std::vector<int64_t>{0, -1}));
  EXPECT_EQ(Data[Nodes[1]->getResult()].ints(),
            (std::vector<int64_t>{INT32_MAX, INT32_MIN + 1, INT32_MIN}));
}

TEST(InterpreterInt, BytesCountEveryValueAndTheLargestOnceMore) {
  auto P = parse(R"(graph @g(%x: f32[4,8], %k: i32[16]) {
  %y = neg(%x) : f32[4,8]
  %v, %i = sort(%k) : i32[16], i64[16]
  return %y, %v, %i
}
)");
  ASSERT_TRUE(P->M);
  const Graph &G = P->graph();
  // Values: 32 + 16 + 32 + 16 + 16 elements at 8 bytes, plus 32 again.
  EXPECT_EQ(interpretBytes(G), (32 + 16 + 32 + 16 + 16 + 32) * 8u);
  EXPECT_FALSE(checkInterpretable(G, interpretBytes(G)));
  std::optional<InterpretRefusal> R =
      checkInterpretable(G, interpretBytes(G) - 1);
  ASSERT_TRUE(R);
  // The sort crosses the budget: the refusal points at it.
  EXPECT_EQ(R->Loc, G.getNodes()[1]->getLoc());
  EXPECT_NE(R->Message.find("up to '%v'"), std::string::npos) << R->Message;
  R = checkInterpretable(G, 100);
  ASSERT_TRUE(R);
  EXPECT_EQ(R->Loc, G.getLoc());
  EXPECT_GT(defaultInterpretMaxBytes(), 0u);
}
