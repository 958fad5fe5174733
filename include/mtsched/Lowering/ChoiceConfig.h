//===- ChoiceConfig.h - Which candidates each op gets -----------*- C++ -*-===//
//
// The candidate lists lowering attaches to multi-template buffers. Users
// change them without recompiling through a JSON choices file (see
// docs/PASSES.md) and --disable-choices.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_LOWERING_CHOICECONFIG_H
#define MTSCHED_LOWERING_CHOICECONFIG_H

#include "mtsched/IR/Graph.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Error.h"
#include <string>
#include <vector>

namespace mtsched {

struct GemmTileConfig {
  int BM, BN, BK, Warps, Stages;
};

struct ChoiceConfig {
  std::vector<GemmTileConfig> GemmTiles;
  /// Extern library choices offered for every matmul.
  std::vector<std::string> GemmExterns;
  std::vector<std::string> AllReduce;
  std::vector<std::string> AllGather;
  std::vector<std::string> ReduceScatter;
  std::vector<std::string> AllToAll;
  /// Choice names removed everywhere (also from custom ops' configs).
  llvm::StringSet<> Disabled;

  /// The built-in lists.
  static ChoiceConfig getDefault();
  /// Replaces the lists a JSON choices file names; errors name the file and
  /// the offending key.
  llvm::Error loadFile(llvm::StringRef Path);

  /// Candidates for a matmul with the given result problem, pruned to tiles
  /// that fit the shape, then the extern choices.
  std::vector<Choice> gemmChoices(int64_t M, int64_t N, int64_t K) const;
  /// Candidates for a built-in collective.
  std::vector<Choice> collectiveChoices(CollectiveKind K) const;
};

/// `gemm_128x64x32_w4_s3`.
std::string gemmChoiceName(const GemmTileConfig &T);
/// The tile a gemm choice's name describes, if it is one.
llvm::Optional<GemmTileConfig> gemmTileOf(const Choice &C);

} // namespace mtsched

#endif // MTSCHED_LOWERING_CHOICECONFIG_H
