//===- DecisionsSource.h - Decisions read from a decided module -*- C++ -*-===//
//
// --decisions-from=FILE: a module decided before (mtsched-opt
// --size-hints-m=...) whose dispatch tables decide the matmuls of the graph
// being tuned without benchmarking them. A node takes the entry of the node
// of the same name in FILE's graph when the two differ only in their rows
// (M), and the entry covers its M (the smallest hint >= M) with a choice the
// node offers too; any other node is tuned as usual, with the reason
// (docs/PASSES.md, `autotune` step 5).
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_AUTOTUNE_DECISIONSSOURCE_H
#define MTSCHED_AUTOTUNE_DECISIONSSOURCE_H

#include "mtsched/IR/Graph.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/SourceMgr.h"
#include <memory>
#include <string>

namespace mtsched {

class DecisionsSource {
public:
  /// What FILE says about one node: the hint and choice taken, or why
  /// there is none (Miss).
  struct Match {
    int64_t Hint = 0;
    std::string Choice;
    /// FILE's node ran its epilogue fused, and its epilogue is the node's
    /// (the same values, in order).
    bool SameEpilogueFused = false;
    /// Non-empty: the node is tuned as usual, for this reason.
    std::string Miss;
  };

  /// Reads Path: parsed and verified like an input (errors at
  /// FILE:line:col on stderr), every multi-template buffer decided and at
  /// least one matmul with a dispatch table in rows (`dispatch m`). An
  /// error that was printed is a ReportedError; one that was not (the file
  /// cannot be read) carries its message.
  static llvm::Expected<std::shared_ptr<const DecisionsSource>>
  load(llvm::StringRef Path);

  /// The entry for matmul N of graph G (a graph of module M, the module
  /// being tuned).
  Match lookup(const Module &M, const Graph &G,
               const MultiTemplateBufferNode &N) const;

  llvm::StringRef getPath() const { return Path; }
  /// A hash of FILE's text: the pre-sync's flags carry it, so ranks that
  /// read different files (and would skip different nodes) stop together.
  uint64_t getFingerprint() const { return Fingerprint; }

private:
  DecisionsSource() = default;
  std::string Path;
  uint64_t Fingerprint = 0;
  /// Holds FILE's buffer, which the module's locations point into.
  llvm::SourceMgr SM;
  std::unique_ptr<Module> Mod;
  /// Graph name -> node name -> node.
  llvm::StringMap<llvm::StringMap<const MultiTemplateBufferNode *>> Nodes;
};

} // namespace mtsched

#endif // MTSCHED_AUTOTUNE_DECISIONSSOURCE_H
