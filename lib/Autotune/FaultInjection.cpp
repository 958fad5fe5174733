//===- FaultInjection.cpp -------------------------------------------------===//
#include "mtsched/Autotune/FaultInjection.h"
#include "llvm/ADT/StringSwitch.h"

using namespace mtsched;

static llvm::Error specError(llvm::StringRef Spec, const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "--inject='" + Spec + "': " + Msg);
}

llvm::Error FaultPlan::add(llvm::StringRef Spec) {
  llvm::SmallVector<llvm::StringRef, 4> Parts;
  Spec.split(Parts, ':');
  using K = Fault::Kind;
  std::optional<K> Kind = llvm::StringSwitch<std::optional<K>>(Parts[0])
                              .Case("late", K::Late)
                              .Case("hang", K::Hang)
                              .Case("exit", K::Exit)
                              .Case("mismatch", K::Mismatch)
                              .Case("build-fail", K::BuildFail)
                              .Case("run-fail", K::RunFail)
                              .Case("wrong-result", K::WrongResult)
                              .Case("timeout", K::Timeout)
                              .Default(std::nullopt);
  if (!Kind)
    return specError(Spec,
                     "unknown fault '" + Parts[0] +
                         "' (known: late, hang, exit, mismatch, build-fail, "
                         "run-fail, wrong-result, timeout)");
  Fault F;
  F.K = *Kind;
  bool HasMs = false;
  for (llvm::StringRef P : llvm::ArrayRef(Parts).drop_front()) {
    auto [Key, Val] = P.split('=');
    if (Key == "rank") {
      if (Val.getAsInteger(10, F.Rank) || F.Rank < 0)
        return specError(Spec, "rank must be a non-negative integer");
    } else if (Key == "ms" && F.K == K::Late) {
      if (Val.getAsInteger(10, F.DelayMs))
        return specError(Spec, "ms must be a non-negative integer");
      HasMs = true;
    } else if (Key == "choice" && !F.isRankFault()) {
      F.Choice = Val.str();
    } else if (Key == "node" && !F.isRankFault()) {
      Val.consume_front("%");
      F.Node = Val.str();
    } else {
      return specError(Spec, "unexpected '" + P + "'");
    }
  }
  if (F.isRankFault() && F.Rank < 0)
    return specError(Spec, "needs rank=R");
  if (F.K == K::Late && !HasMs)
    return specError(Spec, "needs ms=D");
  if (!F.isRankFault() && F.Choice.empty())
    return specError(Spec, "needs choice=NAME");
  Faults.push_back(std::move(F));
  return llvm::Error::success();
}

const Fault *FaultPlan::rankFault(Fault::Kind K, int Rank) const {
  for (const Fault &F : Faults)
    if (F.K == K && F.Rank == Rank)
      return &F;
  return nullptr;
}

const Fault *FaultPlan::choiceFault(int Rank, llvm::StringRef Node,
                                    llvm::StringRef Choice) const {
  for (const Fault &F : Faults)
    if (!F.isRankFault() && F.Choice == Choice &&
        (F.Rank < 0 || F.Rank == Rank) && (F.Node.empty() || F.Node == Node))
      return &F;
  return nullptr;
}
