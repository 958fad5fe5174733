//===- ParserTest.cpp -----------------------------------------------------===//
#include "mtsched/IR/Parser.h"
#include "IRTestUtils.h"
#include "mtsched/IR/Graph.h"
#include "mtsched/IR/Printer.h"
#include "gtest/gtest.h"
#include <cmath>
#include <cstring>

using namespace mtsched;

namespace {

struct Parsed {
  std::unique_ptr<Module> M;
  std::string Diags;
};

Parsed parse(llvm::StringRef Text) {
  test::CapturedSource Src(Text);
  Parsed P;
  P.M = test::parseAndVerify(Src);
  P.Diags = Src.Diags;
  return P;
}

TEST(ParserTest, LoweredNodesHaveTheirKinds) {
  Parsed P = parse(R"(group @tp = [0, 1]
graph @g(%x: bf16[16,32], %w: bf16[32,8], %c: bf16[16,8]) attributes {world_size = 2} {
  %y = multi_template_buffer matmul(%x, %w) choices [gemm_a {bm = 64}, extern.cublas] epilogue [%z] decided gemm_a fused timings {gemm_a = 1.5us, extern.cublas = inf} : bf16[16,8]
  %r = collective_multi_template_buffer all_reduce(%c) {group = "tp"} group @tp kind all_reduce choices [nccl, one_shot] sync ok : bf16[16,8]
  %z = buffer relu(%y) kernel 0 : bf16[16,8]
  return %z, %r
}
)");
  ASSERT_TRUE(P.M) << P.Diags;
  const Graph &G = *P.M->getGraphs()[0];
  ASSERT_EQ(G.size(), 3u);
  Node *Y = G.getNodes()[0].get();
  Node *R = G.getNodes()[1].get();
  Node *Z = G.getNodes()[2].get();
  EXPECT_TRUE(llvm::isa<MultiTemplateBufferNode>(Y));
  EXPECT_FALSE(llvm::isa<CollectiveMultiTemplateBufferNode>(Y));
  // A collective MTB is also an MTB: the kinds form a range.
  EXPECT_TRUE(llvm::isa<MultiTemplateBufferNode>(R));
  EXPECT_TRUE(llvm::isa<CollectiveMultiTemplateBufferNode>(R));
  EXPECT_TRUE(llvm::isa<BufferNode>(Z));
  auto *MTB = llvm::cast<MultiTemplateBufferNode>(Y);
  EXPECT_EQ(MTB->getDecision(), "gemm_a");
  EXPECT_TRUE(MTB->isEpilogueFused());
  ASSERT_EQ(MTB->getEpilogue().size(), 1u);
  EXPECT_EQ(MTB->getEpilogue()[0].V, Z->getResult());
  EXPECT_TRUE(std::isinf(MTB->getTimings()[1].Us));
  EXPECT_TRUE(MTB->getChoices()[1].isExtern());
  EXPECT_EQ(llvm::cast<CollectiveMultiTemplateBufferNode>(R)->getSync(),
            SyncState::Ok);
  EXPECT_EQ(llvm::cast<BufferNode>(Z)->getKernel(), 0);
}

TEST(ParserTest, PrintIsAFixedPoint) {
  const char *Text =
      R"(graph @g(%x: f32[4,8], %b: f32[8]) attributes {world_size = 1, name = "a\"b", ratio = 0.1, flags = [true, 2, [3.5]]} {
  %y = add(%x, %b) : f32[4,8]
  %s = sum(%y) {dim = 0} : f32[8]
  return %y, %s
}
)";
  Parsed P = parse(Text);
  ASSERT_TRUE(P.M) << P.Diags;
  std::string Once = moduleToString(*P.M);
  EXPECT_EQ(Once, Text);
  Parsed Again = parse(Once);
  ASSERT_TRUE(Again.M) << Again.Diags;
  EXPECT_EQ(moduleToString(*Again.M), Once);
}

TEST(ParserTest, ErrorsCarryLineAndColumn) {
  Parsed P = parse("graph @g(%x: f32[4]) {\n  %y = rleu(%x) : f32[4]\n  "
                   "return %y\n}\n");
  EXPECT_FALSE(P.M);
  EXPECT_NE(P.Diags.find("t.mir:2:8: error: unknown op 'rleu'; did you mean "
                         "'relu'?"),
            std::string::npos)
      << P.Diags;
}

TEST(ParserTest, CloneIsIndependent) {
  Parsed P = parse("graph @g(%x: f32[4]) {\n  %y = relu(%x) : f32[4]\n  "
                   "return %y\n}\n");
  ASSERT_TRUE(P.M) << P.Diags;
  std::unique_ptr<Module> C = P.M->clone();
  EXPECT_EQ(moduleToString(*C), moduleToString(*P.M));
  const Graph &G = *C->getGraphs()[0];
  EXPECT_EQ(G.getNodes()[0]->getOperand(0), G.getInputs()[0].get());
  EXPECT_NE(G.getNodes()[0]->getOperand(0),
            P.M->getGraphs()[0]->getInputs()[0].get());
}

} // namespace

namespace {

/// Prints M, parses the text back and prints it again.
std::string reprint(const std::string &Text) {
  test::CapturedSource Src(Text);
  std::unique_ptr<Module> M = test::parseAndVerify(Src);
  EXPECT_TRUE(M) << Src.Diags << "\n--- in ---\n" << Text;
  return M ? moduleToString(*M) : "";
}

Module singleGraph(AttrDict Attrs, std::string CustomName) {
  Module M;
  auto G = std::make_unique<Graph>("g");
  G->getAttrs() = std::move(Attrs);
  Value *X = G->addInput("x", TensorType(DType::F32, {4}), {});
  auto C = std::make_unique<OpNode>(OpCode::Custom, llvm::SMLoc());
  C->setCustomName(std::move(CustomName));
  C->getOperands().push_back({X, {}});
  C->getConfigs().push_back({"impl", {}, {}});
  Node *N = G->appendNode(std::move(C),
                          G->createValue("y", TensorType(DType::F32, {4}), {}));
  G->getOutputs().push_back({N->getResult(), {}});
  M.getGraphs().push_back(std::move(G));
  return M;
}

} // namespace

TEST(ParserTest, TrickyFloatsRoundTripBitForBit) {
  const double Values[] = {0.1,
                           1.0 / 3.0,
                           -2.0 / 3.0,
                           1e-5,
                           1e-300,
                           4.9406564584124654e-324, // smallest subnormal
                           2.2250738585072014e-308, // smallest normal
                           1.7976931348623157e308,  // largest finite
                           -0.0,
                           10.0,
                           1e16,
                           9007199254740993.0,
                           123456.789,
                           INFINITY,
                           -INFINITY};
  AttrDict D;
  for (size_t I = 0; I < sizeof(Values) / sizeof(Values[0]); ++I)
    D.set("f" + std::to_string(I), Attribute::getFloat(Values[I]));
  std::string Once = moduleToString(singleGraph(D, "op"));

  test::CapturedSource Src(Once);
  std::unique_ptr<Module> M = test::parseAndVerify(Src);
  ASSERT_TRUE(M) << Src.Diags << Once;
  const AttrDict &Back = M->getGraphs()[0]->getAttrs();
  for (size_t I = 0; I < sizeof(Values) / sizeof(Values[0]); ++I) {
    const Attribute *A = Back.get("f" + std::to_string(I));
    ASSERT_TRUE(A && A->isFloat()) << I;
    double V = A->getFloat();
    EXPECT_EQ(std::memcmp(&V, &Values[I], sizeof(double)), 0)
        << "value " << I << " came back as " << V << " from\n"
        << Once;
  }
  EXPECT_EQ(reprint(Once), Once);
}

TEST(ParserTest, EveryByteInStringsAndCustomNamesRoundTrips) {
  std::string All;
  for (int C = 1; C < 256; ++C)
    All += static_cast<char>(C);
  AttrDict D;
  D.set("bytes", Attribute::getString(All));
  D.set("nul", Attribute::getString(std::string("a\0b", 3)));
  D.set("empty", Attribute::getString(""));
  std::string Once = moduleToString(singleGraph(D, All));

  test::CapturedSource Src(Once);
  std::unique_ptr<Module> M = test::parseAndVerify(Src);
  ASSERT_TRUE(M) << Src.Diags << Once;
  const Graph &G = *M->getGraphs()[0];
  EXPECT_EQ(G.getAttrs().getString("bytes").value(), All);
  EXPECT_EQ(G.getAttrs().getString("nul").value(), llvm::StringRef("a\0b", 3));
  EXPECT_EQ(G.getAttrs().getString("empty").value(), "");
  EXPECT_EQ(G.getNodes()[0]->getCustomName(), All);
  EXPECT_EQ(reprint(Once), Once);
  // The printed text is one line per construct: no raw newlines or other
  // control characters escape into it.
  for (char C : Once)
    EXPECT_TRUE(C == '\n' || (C >= ' ' && C < 127)) << int(C);
}

TEST(ParserTest, TimingsAndDispatchKeepTheirLocations) {
  test::CapturedSource Src(
      "graph @g(%a: f32[4,8], %b: f32[8,4]) {\n"
      "  %y = multi_template_buffer matmul(%a, %b) choices [p, q] timings "
      "{p = 1.0us, q = inf} dispatch m {8 = p} : f32[4,4]\n"
      "  return %y\n}\n");
  std::unique_ptr<Module> M = test::parseAndVerify(Src);
  ASSERT_TRUE(M) << Src.Diags;
  auto *Y = llvm::cast<MultiTemplateBufferNode>(
      M->getGraphs()[0]->getNodes()[0].get());
  EXPECT_EQ(llvm::StringRef(Y->getTimings()[0].Loc.getPointer(), 9),
            "p = 1.0us");
  EXPECT_EQ(llvm::StringRef(Y->getTimings()[1].Loc.getPointer(), 7), "q = inf");
  EXPECT_EQ(llvm::StringRef(Y->getDispatch()[0].Loc.getPointer(), 5), "8 = p");
  EXPECT_EQ(Y->getDispatchUnit(), DispatchUnit::M);
  EXPECT_EQ(llvm::StringRef(Y->getDispatchUnitLoc().getPointer(), 3), "m {");
}

TEST(ParserTest, StopsAtTheFirstErrorWithOneDiagnostic) {
  test::CapturedSource Src("graph @g(%x: f32[4]) {\n  %y = rleu(%x) : f32[4]\n"
                           "  %z = nope(%y) : f32[4]\n  return %q\n}\n");
  EXPECT_FALSE(test::parse(Src));
  EXPECT_EQ(Src.Diags, "t.mir:2:8: error: unknown op 'rleu'; did you mean "
                       "'relu'?\n  %y = rleu(%x) : f32[4]\n       ^\n");
}

TEST(ParserTest, EmptyInputIsAnEmptyModule) {
  for (const char *Text : {"", "\n\n", "// only a comment\n", "  \t\r\n"}) {
    test::CapturedSource Src(Text);
    std::unique_ptr<Module> M = test::parseAndVerify(Src);
    ASSERT_TRUE(M) << Src.Diags;
    EXPECT_TRUE(M->getGraphs().empty());
    EXPECT_EQ(moduleToString(*M), "");
  }
}

TEST(ParserTest, DuplicatesInLongListsAndModulesAreFound) {
  // The parser finds these through sets past a few entries (so that input
  // of many attributes, ranks, groups or graphs parses in linear time); the
  // messages and locations are those of short input.
  std::string Attrs, Ranks, Groups, Graphs;
  for (int I = 0; I < 20; ++I) {
    Attrs += "a" + std::to_string(I) + " = " + std::to_string(I) + ", ";
    Ranks += std::to_string(I) + ", ";
    Groups += "group @p" + std::to_string(I) + " = [0]\n";
    Graphs += "graph @g" + std::to_string(I) + "() {\n  return\n}\n";
  }
  Parsed P =
      parse("graph @g() attributes {" + Attrs + "a5 = 1} {\n  return\n}\n");
  EXPECT_FALSE(P.M);
  EXPECT_NE(P.Diags.find("error: duplicate attribute 'a5'"), std::string::npos)
      << P.Diags;
  P = parse("group @p = [" + Ranks + "11]\n");
  EXPECT_FALSE(P.M);
  EXPECT_NE(P.Diags.find("error: rank 11 appears twice in group '@p'"),
            std::string::npos)
      << P.Diags;
  P = parse(Groups + "group @p13 = [1]\n");
  EXPECT_FALSE(P.M);
  EXPECT_NE(P.Diags.find("t.mir:21:7: error: redefinition of group '@p13'"),
            std::string::npos)
      << P.Diags;
  EXPECT_NE(P.Diags.find("t.mir:14:7: note: previous definition is here"),
            std::string::npos)
      << P.Diags;
  P = parse(Graphs + "graph @g2() {\n  return\n}\n");
  EXPECT_FALSE(P.M);
  EXPECT_NE(P.Diags.find("t.mir:61:7: error: redefinition of graph '@g2'"),
            std::string::npos)
      << P.Diags;
  EXPECT_NE(P.Diags.find("t.mir:7:7: note: previous definition is here"),
            std::string::npos)
      << P.Diags;
}
