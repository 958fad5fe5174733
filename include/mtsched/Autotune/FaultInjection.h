//===- FaultInjection.h - Faults tests can cause on purpose -----*- C++ -*-===//
//
// `--inject=SPEC` (repeatable) makes a rank or a choice misbehave so tests
// can check that every fault ends in bounded time with the survivors
// agreeing. SPEC is `KIND[:key=value]...`:
//
//   late:rank=R:ms=D          rank R reaches the pre-sync D ms late
//   hang:rank=R               rank R never reaches the pre-sync
//   exit:rank=R               rank R exits before the pre-sync
//   mismatch:rank=R           rank R collects different collective nodes
//   build-fail:choice=C       choice C fails to compile
//   run-fail:choice=C         choice C fails when launched
//   wrong-result:choice=C     choice C returns a wrong result
//   timeout:choice=C          choice C runs past --choice-timeout-ms
//
// Choice faults take optional `node=%name` and `rank=R` to narrow them.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_AUTOTUNE_FAULTINJECTION_H
#define MTSCHED_AUTOTUNE_FAULTINJECTION_H

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <string>
#include <vector>

namespace mtsched {

struct ChoiceConfig;
class Module;

struct Fault {
  enum class Kind {
    Late,
    Hang,
    Exit,
    Mismatch,
    BuildFail,
    RunFail,
    WrongResult,
    Timeout
  };
  Kind K;
  /// -1: every rank (choice faults only).
  int Rank = -1;
  unsigned DelayMs = 0;
  std::string Choice;
  /// Without '%'; empty: every node.
  std::string Node;

  bool isRankFault() const { return K <= Kind::Mismatch; }
  /// The --inject text it was parsed from, for messages.
  std::string Spec;
};

class FaultPlan {
public:
  /// Parses one --inject spec.
  llvm::Error add(llvm::StringRef Spec);
  bool empty() const { return Faults.empty(); }
  /// Whether every fault is a rank fault (late, exit, hang, mismatch): they
  /// take ranks away but change no measurement.
  bool onlyRankFaults() const {
    return llvm::all_of(Faults, [](const Fault &F) { return F.isRankFault(); });
  }

  /// Checks that every fault names what exists in this run: a rank below
  /// NumRanks, a node of M that is (or that lowering makes) a multi-template
  /// buffer, and a choice among that node's candidates (any such node's,
  /// without node=). Candidates lowering has not attached yet are those
  /// Choices gives. A fault that can never fire is a typo in a test, so it
  /// is an error rather than a silent no-op.
  llvm::Error checkTargets(const Module &M, const ChoiceConfig &Choices,
                           int NumRanks) const;

  /// The first rank fault of kind K for Rank, if any.
  const Fault *rankFault(Fault::Kind K, int Rank) const;
  /// The choice fault hitting (Rank, node, choice), if any.
  const Fault *choiceFault(int Rank, llvm::StringRef Node,
                           llvm::StringRef Choice) const;

private:
  std::vector<Fault> Faults;
};

} // namespace mtsched

#endif // MTSCHED_AUTOTUNE_FAULTINJECTION_H
