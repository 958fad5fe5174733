//===- VerifierTest.cpp ---------------------------------------------------===//
//
// verifyModule reports each problem through the SourceMgr at its location
// and returns an error that counts them. Rules reachable from text are
// covered one by one in test/lit/IR/verifier-*.mir; these tests check the
// contract of the call, and the rules only a pass building IR through the
// API can break.
//
//===----------------------------------------------------------------------===//
#include "mtsched/IR/Verifier.h"
#include "IRTestUtils.h"
#include "mtsched/IR/Graph.h"
#include "gtest/gtest.h"

using namespace mtsched;

namespace {

/// Verifies M, returning the error's message ("" on success).
std::string verify(const Module &M, llvm::SourceMgr &SM) {
  if (llvm::Error E = verifyModule(M, SM))
    return llvm::toString(std::move(E));
  return "";
}

struct Case {
  const char *Text;
  /// The one diagnostic expected, as printed (without the source line).
  const char *Diag;
};

} // namespace

TEST(VerifierTest, ValidModuleVerifies) {
  test::CapturedSource Src(R"(group @tp = [0, 1]
graph @g(%x: bf16[8,16], %w: bf16[16,16], %g: bf16[16]) attributes {world_size = 2} {
  %y = matmul(%x, %w) : bf16[8,16]
  %r = all_reduce(%y) {reduce = "sum", group = "tp"} : bf16[8,16]
  %n = rmsnorm(%r, %g) {eps = 1e-05} : bf16[8,16]
  return %n
}
)");
  std::unique_ptr<Module> M = test::parse(Src);
  ASSERT_TRUE(M) << Src.Diags;
  EXPECT_EQ(verify(*M, Src.SM), "");
  EXPECT_EQ(Src.Diags, "");
}

TEST(VerifierTest, EachRuleReturnsAnErrorAndReportsIt) {
  const Case Cases[] = {
      {"graph @g(%x: f32[4]) {\n  %y = relu(%x, %x) : f32[4]\n  return %y\n}",
       "t.mir:2:8: error: 'relu' expects 1 operand, got 2"},
      {"graph @g(%a: f32[4,8], %b: f32[4,8]) {\n  %y = matmul(%a, %b) : "
       "f32[4,8]\n  return %y\n}",
       "t.mir:2:19: error: 'matmul' inner dimensions differ: '%a' has 8 "
       "columns but '%b' has 4 rows"},
      {"graph @g(%x: f32[4,8], %b: f32[4]) {\n  %y = add(%x, %b) : f32[4,8]\n"
       "  return %y\n}",
       "t.mir:2:16: error: operands of 'add' cannot be broadcast together: "
       "[4,8] and [4]"},
      {"graph @g(%x: f32[4,8]) {\n  %s = sum(%x) {dim = 2} : f32[4]\n  "
       "return %s\n}",
       "t.mir:2:8: error: dimension 2 is out of range for a tensor of rank 2"},
      {"graph @g(%x: f32[4]) attributes {world_size = 2} {\n  %y = "
       "all_reduce(%x) {group = \"tp\"} : f32[4]\n  return %y\n}",
       "t.mir:2:8: error: unknown process group '@tp'"},
      {"group @tp = [0, -1]\ngraph @g(%x: f32[4]) {\n  return %x\n}",
       "t.mir:1:7: error: group '@tp' has negative rank -1"},
      {"graph @g(%a: f32[4,8], %b: f32[8,4]) {\n  %y = multi_template_buffer "
       "matmul(%a, %b) choices [p] decided q : f32[4,4]\n  return %y\n}",
       "t.mir:2:65: error: decision names 'q', which is not a choice of '%y'"},
      {"graph @g(%x: f32[4]) {\n  %y = buffer matmul(%x, %x) : f32[4]\n  "
       "return %y\n}",
       "t.mir:2:15: error: a buffer must be a pointwise op, a reduction, a "
       "layout op, a sort, a scatter or a scan, not 'matmul'"},
      {"graph @g(%x: f32[4]) {\n  %y = relu(%x) : f32[8]\n  return %y\n}",
       "t.mir:2:8: error: result type f32[8] of '%y' does not match the "
       "inferred type f32[4]"},
  };
  for (const Case &C : Cases) {
    test::CapturedSource Src(C.Text);
    std::unique_ptr<Module> M = test::parse(Src);
    ASSERT_TRUE(M) << Src.Diags;
    EXPECT_EQ(verify(*M, Src.SM), "verification failed with 1 error") << C.Text;
    EXPECT_EQ(llvm::StringRef(Src.Diags).split('\n').first, C.Diag)
        << Src.Diags;
  }
}

TEST(VerifierTest, ReportsEveryProblemAndCountsThem) {
  test::CapturedSource Src("graph @g(%x: f32[4,8], %w: f32[8]) {\n"
                           "  %a = relu(%x) : f32[4]\n"
                           "  %b = exp(%x, %x) : f32[4,8]\n"
                           "  %c = rmsnorm(%x, %w) {eps = 0} : f32[4,8]\n"
                           "  return %a, %b, %c\n}\n");
  std::unique_ptr<Module> M = test::parse(Src);
  ASSERT_TRUE(M) << Src.Diags;
  EXPECT_EQ(verify(*M, Src.SM), "verification failed with 3 errors");
  EXPECT_NE(Src.Diags.find("t.mir:2:8: error: result type"), std::string::npos);
  EXPECT_NE(Src.Diags.find("t.mir:3:8: error: 'exp' expects 1 operand"),
            std::string::npos);
  EXPECT_NE(Src.Diags.find("t.mir:4:8: error: attribute 'eps'"),
            std::string::npos);
}

// A pass that builds nodes out of order, or returns a value of another
// graph, breaks rules the parser makes impossible to break in text.
TEST(VerifierTest, UseBeforeDefinitionBuiltThroughTheAPI) {
  test::CapturedSource Src("graph @g(%x: f32[4]) {\n  %a = relu(%x) : f32[4]\n"
                           "  %b = neg(%a) : f32[4]\n  return %b\n}\n");
  std::unique_ptr<Module> M = test::parse(Src);
  ASSERT_TRUE(M) << Src.Diags;
  Graph &G = *M->getGraphs()[0];
  // Make %a read %b, which is defined after it.
  G.getNodes()[0]->getOperands()[0].V = G.getNodes()[1]->getResult();
  EXPECT_EQ(verify(*M, Src.SM), "verification failed with 1 error");
  EXPECT_EQ(llvm::StringRef(Src.Diags).split('\n').first,
            "t.mir:2:13: error: operand '%b' of '%a' is not defined before "
            "its use");
}

TEST(VerifierTest, ReturnedValueFromAnotherGraph) {
  test::CapturedSource Src("graph @g(%x: f32[4]) {\n  return %x\n}\n"
                           "graph @h(%y: f32[4]) {\n  return %y\n}\n");
  std::unique_ptr<Module> M = test::parse(Src);
  ASSERT_TRUE(M) << Src.Diags;
  M->getGraphs()[0]->getOutputs()[0].V =
      M->getGraphs()[1]->getInputs()[0].get();
  EXPECT_EQ(verify(*M, Src.SM), "verification failed with 1 error");
  EXPECT_EQ(llvm::StringRef(Src.Diags).split('\n').first,
            "t.mir:2:10: error: returned value '%y' is not defined");
}

TEST(VerifierTest, EntriesWithoutLocationsPointAtTheirNode) {
  // Timings and dispatch entries made by the autotuner have no location of
  // their own; errors about them point at the node.
  test::CapturedSource Src("graph @g(%a: f32[4,8], %b: f32[8,4]) {\n  %y = "
                           "multi_template_buffer matmul(%a, %b) choices [p] "
                           ": f32[4,4]\n  return %y\n}\n");
  std::unique_ptr<Module> M = test::parse(Src);
  ASSERT_TRUE(M) << Src.Diags;
  auto *Y = llvm::cast<MultiTemplateBufferNode>(
      M->getGraphs()[0]->getNodes()[0].get());
  Y->getTimings().push_back({"p", 1.0});
  Y->getTimings().push_back({"p", 2.0});
  Y->getDispatch().push_back({64, "q"});
  Y->getDispatch().push_back({32, "p"});
  EXPECT_EQ(verify(*M, Src.SM), "verification failed with 3 errors");
  EXPECT_NE(Src.Diags.find("t.mir:2:30: error: timings names 'p' twice"),
            std::string::npos)
      << Src.Diags;
  EXPECT_NE(Src.Diags.find("t.mir:2:30: error: dispatch table names 'q', "
                           "which is not a choice of '%y'"),
            std::string::npos)
      << Src.Diags;
  EXPECT_NE(Src.Diags.find("t.mir:2:30: error: dispatch size hints must be "
                           "increasing, got 32 after 64"),
            std::string::npos)
      << Src.Diags;
}

TEST(VerifierTest, NamesAPassMadeMustPrintAsParseableText) {
  // A choice list from a user's choices file, or a custom op renamed by a
  // pass, must still print as text that parses back.
  test::CapturedSource Src(
      "graph @g(%x: f32[4]) attributes {world_size = 2} {\n"
      "  %r = collective_multi_template_buffer all_reduce(%x) group @world "
      "kind all_reduce choices [nccl] : f32[4]\n"
      "  %c = custom \"op\"(%r) configs [a] : f32[4]\n  return %c\n}\n");
  std::unique_ptr<Module> M = test::parse(Src);
  ASSERT_TRUE(M) << Src.Diags;
  Graph &G = *M->getGraphs()[0];
  auto *R =
      llvm::cast<CollectiveMultiTemplateBufferNode>(G.getNodes()[0].get());
  R->setChoices(std::vector<Choice>{{"my-choice", {}, {}}, {"2shot", {}, {}}});
  G.getNodes()[1]->setCustomName("");
  EXPECT_EQ(verify(*M, Src.SM), "verification failed with 3 errors");
  EXPECT_NE(Src.Diags.find("t.mir:2:41: error: choice name 'my-choice' of "
                           "'%r' is not an identifier"),
            std::string::npos)
      << Src.Diags;
  EXPECT_NE(Src.Diags.find("error: choice name '2shot' of '%r' is not an "
                           "identifier"),
            std::string::npos)
      << Src.Diags;
  EXPECT_NE(
      Src.Diags.find("t.mir:3:8: error: custom op '%c' has an empty name"),
      std::string::npos)
      << Src.Diags;
}

TEST(VerifierTest, LongListsAreCheckedLikeShortOnes) {
  // Past a few entries duplicates and unknown names are found through sets
  // rather than by comparing each entry with the earlier ones; the messages
  // and locations must not change.
  std::string Names, Timings;
  for (int I = 0; I < 20; ++I) {
    Names += (I ? ", c" : "c") + std::to_string(I);
    Timings += (I ? ", c" : "c") + std::to_string(I) + " = 1.0us";
  }
  std::string Text =
      "graph @g(%x: f32[4]) {\n"
      "  %y = custom \"k\"(%x) configs [" +
      Names +
      ", c7] : f32[4]\n"
      "  %z = collective_multi_template_buffer custom \"my_allreduce\"(%x) "
      "group @world kind all_reduce choices [" +
      Names + "] timings {" + Timings +
      ", c3 = 2.0us, nope = 1.0us} dispatch bytes {1 = c19, 2 = zz} : "
      "f32[4]\n"
      "  return %z\n}\n";
  test::CapturedSource Src(Text);
  std::unique_ptr<Module> M = test::parse(Src);
  ASSERT_TRUE(M) << Src.Diags;
  EXPECT_EQ(verify(*M, Src.SM), "verification failed with 4 errors");
  EXPECT_NE(Src.Diags.find("t.mir:2:"), std::string::npos) << Src.Diags;
  EXPECT_NE(Src.Diags.find("error: duplicate config 'c7' in '%y'"),
            std::string::npos)
      << Src.Diags;
  EXPECT_NE(Src.Diags.find("error: timings names 'c3' twice"),
            std::string::npos)
      << Src.Diags;
  EXPECT_NE(Src.Diags.find("error: timings names 'nope', which is not a "
                           "choice of '%z'"),
            std::string::npos)
      << Src.Diags;
  EXPECT_NE(Src.Diags.find("error: dispatch table names 'zz', which is not a "
                           "choice of '%z'"),
            std::string::npos)
      << Src.Diags;
}
