//===- DrawnValuesTest.cpp - Seeded inputs drawn on demand ----------------===//
#include "mtsched/Reference/DrawnValues.h"
#include "mtsched/IR/Layout.h"
#include "mtsched/IR/Parser.h"
#include "mtsched/Reference/Interpreter.h"
#include "mtsched/Reference/RandomInputs.h"
#include "llvm/Support/SourceMgr.h"
#include "gtest/gtest.h"
#include <cmath>

using namespace mtsched;

namespace {

// Large enough for store() to draw on several threads.
constexpr int64_t Big = (int64_t(1) << 20) + 321;

/// A graph whose epilogue chain reads a row-sized, a column-broadcast, a
/// scalar-like and a whole-tensor operand.
const char *IR =
    R"(graph @g(%x: f32[8,16], %bias: f32[16], %col: f32[8,1], %res: f32[8,16], %s: f32[1]) {
  %a = add(%x, %bias) : f32[8,16]
  %b = mul(%a, %col) : f32[8,16]
  %c = add(%b, %res) : f32[8,16]
  %d = mul(%c, %s) : f32[8,16]
  %e = relu(%d) : f32[8,16]
  return %e
}
)";

struct Parsed {
  llvm::SourceMgr SM;
  std::unique_ptr<Module> M;
  const Graph &graph() const { return *M->getGraphs().front(); }
};

std::unique_ptr<Parsed> parse() {
  auto P = std::make_unique<Parsed>();
  P->SM.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(IR, "t.mir"),
                           llvm::SMLoc());
  P->M = parseModule(P->SM);
  return P;
}

} // namespace

TEST(DrawnValues, ElementsAreRandomValuesDrawnWhole) {
  auto P = parse();
  ASSERT_TRUE(P->M);
  const Value *X = P->graph().getInputs()[0].get();
  for (DType T : {DType::BF16, DType::F16, DType::F32}) {
    DrawnValues D;
    D.add(X, Big, 11, 5, T);
    std::vector<double> Whole = randomValues(Big, 11, 5, T);
    EXPECT_EQ(D.size(X), Big);
    for (int64_t I : {int64_t(0), int64_t(77), Big - 1})
      EXPECT_EQ(D.at(X, I), Whole[size_t(I)]) << I;
    std::vector<double> S = D.slice(X, 1000, 300);
    EXPECT_TRUE(std::equal(S.begin(), S.end(), Whole.begin() + 1000));
    // Stored, the same numbers, through every accessor.
    EXPECT_EQ(D.store(X), Whole);
    EXPECT_EQ(D.data(X)[12345], Whole[12345]);
    EXPECT_EQ(D.at(X, Big - 1), Whole.back());
    EXPECT_EQ(D.slice(X, 1000, 300), S);
  }
}

TEST(DrawnValues, StreamsDifferAndUnknownValuesHaveNoSize) {
  auto P = parse();
  ASSERT_TRUE(P->M);
  const Value *X = P->graph().getInputs()[0].get();
  const Value *Bias = P->graph().getInputs()[1].get();
  DrawnValues D;
  D.add(X, 128, 11, 0, DType::F32);
  EXPECT_EQ(D.size(Bias), -1);
  D.add(Bias, 16, 11, 1, DType::F32);
  EXPECT_NE(D.slice(X, 0, 16), D.slice(Bias, 0, 16));
  // Added again under another stream: the new values, not the stored ones.
  D.store(Bias);
  D.add(Bias, 16, 11, 2, DType::F32);
  EXPECT_EQ(D.slice(Bias, 0, 16), randomValues(16, 11, 2, DType::F32));
}

TEST(DrawnValues, RowChainReadsDrawnAsStoredValues) {
  // The benchmark's reference (drawn) and the interpreter's (stored) apply
  // an epilogue to a row alike, broadcasting included.
  auto P = parse();
  ASSERT_TRUE(P->M);
  const Graph &G = P->graph();
  DrawnValues D;
  ValueData Stored;
  for (auto [I, V] : llvm::enumerate(G.getInputs())) {
    int64_t N = V->getType().numElements();
    D.add(V.get(), N, 3, I, DType::F32);
    Stored[V.get()] = HostValues(randomValues(N, 3, I, DType::F32));
  }
  std::vector<const Node *> Chain;
  for (const auto &N : G.getNodes())
    Chain.push_back(N.get());
  const Value *X = G.getInputs()[0].get();
  for (int64_t R = 0; R < 8; ++R) {
    std::vector<double> RowD = D.slice(X, R * 16, 16), RowS = RowD;
    // Starting after %a: its result is the row, the rest are operands.
    llvm::ArrayRef<const Node *> Rest(Chain);
    ASSERT_FALSE(bool(interpretRowChain(Rest.drop_front(),
                                        Chain[0]->getResult(), R, 8, RowD, D)));
    ASSERT_FALSE(bool(interpretRowChain(
        Rest.drop_front(), Chain[0]->getResult(), R, 8, RowS, Stored)));
    EXPECT_EQ(RowD, RowS) << R;
  }
  // An operand without a value is an error, not a read out of bounds.
  DrawnValues Missing;
  std::vector<double> Row(16, 1.0);
  llvm::Error E =
      interpretRowChain(llvm::ArrayRef<const Node *>(Chain).drop_front(),
                        Chain[0]->getResult(), 0, 8, Row, Missing);
  ASSERT_TRUE(bool(E));
  EXPECT_NE(llvm::toString(std::move(E)).find("no value for '%col'"),
            std::string::npos);
}

TEST(DrawnValues, RowChainMapsThroughLayoutOps) {
  // A matmul's epilogue through a reshape and a transpose (index
  // substitution): the row chain keeps the template's order, reads later
  // operands at the mapped index, and its element C of row R is the
  // interpreter's result at the maps' image of R * 16 + C, drawn operands
  // or stored alike.
  const char *Text =
      R"(graph @l(%x: f32[8,16], %cos: f32[4,8], %res: f32[2,2,4,8]) {
  %r = reshape(%x) : f32[2,4,2,8]
  %t = transpose(%r) {perm = [0, 2, 1, 3]} : f32[2,2,4,8]
  %m = mul(%t, %cos) : f32[2,2,4,8]
  %a = add(%res, %m) : f32[2,2,4,8]
  return %a
}
)";
  llvm::SourceMgr SM;
  SM.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(Text, "l.mir"),
                        llvm::SMLoc());
  std::unique_ptr<Module> M = parseModule(SM);
  ASSERT_TRUE(M);
  const Graph &G = *M->getGraphs().front();
  DrawnValues D;
  ValueData Stored;
  for (auto [I, V] : llvm::enumerate(G.getInputs())) {
    int64_t N = V->getType().numElements();
    D.add(V.get(), N, 5, I, DType::F32);
    Stored[V.get()] = HostValues(randomValues(N, 5, I, DType::F32));
  }
  ValueData Whole = Stored;
  ASSERT_FALSE(bool(interpretGraph(G, Whole)));
  std::vector<const Node *> Chain;
  std::vector<ElementMap> Maps;
  for (const auto &N : G.getNodes()) {
    Chain.push_back(N.get());
    if (std::optional<ElementMap> Map = elementMapOf(*N))
      Maps.push_back(*Map);
  }
  ASSERT_EQ(Maps.size(), 2u);
  const Value *X = G.getInputs()[0].get();
  const HostValues &Out = Whole[G.getOutputs()[0].V];
  for (int64_t R = 0; R < 8; ++R) {
    std::vector<double> RowD = D.slice(X, R * 16, 16), RowS = RowD;
    ASSERT_FALSE(bool(interpretRowChain(Chain, X, R, 8, RowD, D)));
    ASSERT_FALSE(bool(interpretRowChain(Chain, X, R, 8, RowS, Stored)));
    EXPECT_EQ(RowD, RowS) << R;
    for (int64_t C = 0; C < 16; ++C) {
      int64_t At = R * 16 + C;
      for (const ElementMap &Map : Maps)
        At = Map.apply(At);
      EXPECT_EQ(RowS[C], Out.getDouble(size_t(At))) << R << ", " << C;
    }
  }
}

TEST(DrawnValues, BoundedDrawsAreIndicesInRange) {
  // grouped_mm's expert ids as the benchmarker draws them: every element in
  // [0, Bound), each of them drawn, and the same whether read one by one,
  // as a slice or stored.
  auto P = parse();
  ASSERT_TRUE(P);
  const Value *V = P->graph().getInputs()[0].get();
  DrawnValues D;
  const int64_t Bound = 8;
  D.add(V, Big, 3, 1, DType::I64, Bound);
  std::vector<double> Slice = D.slice(V, 1000, 64);
  std::vector<int64_t> Seen(Bound, 0);
  for (int64_t I = 0; I < 4096; ++I) {
    double X = D.at(V, I);
    ASSERT_EQ(X, std::floor(X));
    ASSERT_GE(X, 0);
    ASSERT_LT(X, Bound);
    ++Seen[int64_t(X)];
  }
  for (int64_t C : Seen)
    EXPECT_GT(C, 0);
  const std::vector<double> &All = D.store(V);
  ASSERT_EQ(int64_t(All.size()), Big);
  for (int64_t I = 0; I < 64; ++I)
    EXPECT_EQ(All[1000 + I], Slice[I]);
  EXPECT_EQ(All[Big - 1], D.at(V, Big - 1));
}
