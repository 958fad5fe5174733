// The autotune summary, from hand-made RunResults: the cases the simulator
// does not produce on its own (ranks that measured differently, long choice
// lists, a node the module does not hold).
#include "mtsched/Tools/Summary.h"
#include "mtsched/Autotune/Autotuner.h"
#include "mtsched/IR/Graph.h"
#include "llvm/Support/raw_ostream.h"
#include "gtest/gtest.h"
#include <cmath>

using namespace mtsched;

namespace {

ChoiceResult choice(const std::string &Name, double Us,
                    double FusedUs = INFINITY) {
  ChoiceResult C;
  C.Name = Name;
  C.Status = std::isfinite(Us) ? ChoiceStatus::Ok : ChoiceStatus::Failed;
  C.Us = C.LocalUs = Us;
  C.FusedUs = FusedUs;
  return C;
}

std::string summary(const RunResult &R, int Ranks) {
  Module M;
  std::string S;
  llvm::raw_string_ostream OS(S);
  printAutotuneSummary(R, M, Ranks, OS);
  return OS.str();
}

TEST(AutotuneSummary, NamesTheSlowestRankOfTheChosenChoice) {
  RunResult R;
  NodeResult N;
  N.Graph = "g";
  N.Name = "%r";
  N.Op = "all_reduce";
  N.Group = "tp";
  N.Choices = {choice("nccl", 20), choice("one_shot", 10)};
  N.Chosen = "one_shot";
  R.Nodes.push_back(N);
  // Rank 1 measured one_shot slower: its time is the one decided on.
  R.RankLocalUs = {{{19, 9}}, {{20, 10}}};
  std::string S = summary(R, 2);
  EXPECT_NE(S.find("AUTOTUNE @g %r all_reduce() group @tp on 2 ranks: "
                   "measured (max over ranks)\n"),
            std::string::npos)
      << S;
  EXPECT_NE(S.find("  one_shot 0.0100 ms 100.0%  <- chosen (rank 1 slowest)\n"
                   "  nccl 0.0200 ms 50.0%\n"),
            std::string::npos)
      << S;
}

TEST(AutotuneSummary, CutsLongListsButKeepsTheChoice) {
  RunResult R;
  NodeResult N;
  N.Graph = "g";
  N.Name = "%y";
  N.Op = "matmul";
  for (int I = 0; I < 14; ++I)
    N.Choices.push_back(choice("c" + std::to_string(I), 10 + I));
  // The heuristic may pick a slower choice (a speedup threshold); it is
  // still shown below the cut.
  N.Chosen = "c13";
  R.Nodes.push_back(N);
  std::string S = summary(R, 1);
  EXPECT_NE(S.find("  c9 0.0190 ms"), std::string::npos) << S;
  EXPECT_EQ(S.find("  c10 "), std::string::npos) << S;
  EXPECT_NE(S.find("  ... 4 more\n  c13 0.0230 ms 43.5%  <- chosen\n"),
            std::string::npos)
      << S;
  EXPECT_NE(S.find("on 1 rank: measured\n"), std::string::npos) << S;
}

TEST(AutotuneSummary, FusedAndUnfusedRowsCompareTotals) {
  RunResult R;
  NodeResult N;
  N.Graph = "g";
  N.Name = "%r";
  N.Op = "all_reduce";
  N.Choices = {choice("nccl", 20), choice("two_shot", 10, 12)};
  N.EpilogueUs = 5;
  N.Chosen = "two_shot";
  N.EpilogueFused = true;
  R.Nodes.push_back(N);
  std::string S = summary(R, 1);
  // two_shot unfused pays for the epilogue kernel: 10 + 5 = 15.
  EXPECT_NE(S.find("  two_shot 0.0120 ms 100.0% fused  <- chosen\n"
                   "  two_shot 0.0150 ms 80.0% unfused\n"
                   "  nccl 0.0250 ms 48.0% unfused\n"),
            std::string::npos)
      << S;
}

TEST(AutotuneSummary, FailedChoicesComeLastWithTheirMessage) {
  RunResult R;
  NodeResult N;
  N.Graph = "g";
  N.Name = "%y";
  N.Op = "matmul";
  N.Choices = {choice("bad", INFINITY), choice("good", 10)};
  N.Choices[0].Message = "NVRTC said no";
  N.Chosen = "good";
  R.Nodes.push_back(N);
  R.BenchmarksRun = 2;
  std::string S = summary(R, 1);
  EXPECT_NE(S.find("  good 0.0100 ms 100.0%  <- chosen\n"
                   "  bad failed: NVRTC said no\n"
                   "AUTOTUNE: 1 node decided, 2 benchmarks run, 0 from the "
                   "cache, 0 fallbacks\n"),
            std::string::npos)
      << S;
}

} // namespace
