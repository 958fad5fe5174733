//===- PipelineTextTest.cpp - mlir-opt's textual pipelines ----------------===//
#include "mtsched/Passes/PassRegistry.h"
#include "gtest/gtest.h"

using namespace mtsched;

namespace {

/// `name{k=v,...}` per element, to compare whole results at once.
std::string show(llvm::StringRef Text) {
  llvm::Expected<std::vector<PipelineElement>> Els = parsePipelineText(Text);
  if (!Els)
    return "error: " + llvm::toString(Els.takeError());
  std::string Out;
  for (const PipelineElement &E : *Els) {
    Out += (Out.empty() ? "" : " ") + E.Name;
    for (const auto &[K, V] : E.Options)
      Out += "{" + K + "=" + V + "}";
  }
  return Out;
}

TEST(PipelineText, PlainList) {
  EXPECT_EQ(show("lower,fuse"), "lower fuse");
  EXPECT_EQ(show(" lower , fuse "), "lower fuse");
  EXPECT_EQ(show(""), "");
}

TEST(PipelineText, BuiltinModuleAnchor) {
  EXPECT_EQ(show("builtin.module(lower,fuse)"), "lower fuse");
  EXPECT_EQ(show("builtin.module(lower,builtin.module(fuse),autotune)"),
            "lower fuse autotune");
  EXPECT_EQ(show("builtin.module()"), "");
  EXPECT_EQ(show("any(lower)"), "lower");
}

TEST(PipelineText, Options) {
  EXPECT_EQ(show("builtin.module(fuse{heuristic=never speedup-threshold=1.5})"),
            "fuse{heuristic=never}{speedup-threshold=1.5}");
  // A value keeps its commas; mlir-opt's braced list values lose the braces.
  EXPECT_EQ(show("autotune{size-hints-m=16,32},fuse"),
            "autotune{size-hints-m=16,32} fuse");
  EXPECT_EQ(show("autotune{size-hints-m={16,32}}"),
            "autotune{size-hints-m=16,32}");
  EXPECT_EQ(show("fuse{}"), "fuse");
}

TEST(PipelineText, Errors) {
  EXPECT_EQ(show("func.func(lower)"),
            "error: in pipeline 'func.func(lower)' at offset 10: "
            "'func.func(...)': passes run on the whole module only; anchor "
            "the pipeline on 'builtin.module(...)'");
  EXPECT_EQ(show("builtin.module(lower"),
            "error: in pipeline 'builtin.module(lower' at offset 20: "
            "expected ')'");
  EXPECT_EQ(show("lower,,fuse"),
            "error: in pipeline 'lower,,fuse' at offset 6: expected a pass "
            "name");
  EXPECT_EQ(show("lower)"), "error: in pipeline 'lower)' at offset 5: "
                            "expected ',' or the end of the pipeline");
  EXPECT_EQ(show("fuse{heuristic}"),
            "error: in pipeline 'fuse{heuristic}' at offset 14: expected "
            "'=' after the option 'heuristic' of 'fuse'");
  EXPECT_EQ(show("fuse{heuristic=never"),
            "error: in pipeline 'fuse{heuristic=never' at offset 15: "
            "expected '}' to end the options of 'fuse'");
}

TEST(PipelineText, NearestName) {
  std::vector<llvm::StringRef> Names{"lower", "fuse", "fuse-swiglu",
                                     "autotune"};
  EXPECT_EQ(nearestName("fsue", Names), "fuse");
  EXPECT_EQ(nearestName("lowr", Names), "lower");
  EXPECT_EQ(nearestName("autotuen", Names), "autotune");
  EXPECT_EQ(nearestName("fuse-swigl", Names), "fuse-swiglu");
  // Nothing within a third of the name's length (at least 2 edits).
  EXPECT_EQ(nearestName("schedule-everything", Names), "");
  EXPECT_EQ(nearestName("xyz", Names), "");
}

} // namespace
