//===- PassOptionFlags.cpp - Pass options as mtsched-opt flags ------------===//
//
// The flags themselves are declared where their topic is (OptCommandLine.cpp,
// lib/Tools): this file only finds them by name among the registered
// options, so a row naming a flag this build lacks fails loudly.
//
//===----------------------------------------------------------------------===//
#include "mtsched/Driver/PassOptionFlags.h"
#include "mtsched/Passes/PassRegistry.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include <vector>

using namespace llvm;
using namespace mtsched;

static constexpr PassOptionFlag PassOptionFlagTable[] = {
    {"lower", "collective-mode", "collective-mode"},
    {"lower", "disable-choices", "disable-choices"},
    {"lower", "choices-file", "choices-file"},
    {"fuse", "heuristic", "fusion-heuristic"},
    {"fuse", "fusion-heuristic", "fusion-heuristic"},
    {"fuse", "speedup-threshold", "fusion-speedup-threshold"},
    {"fuse", "fusion-speedup-threshold", "fusion-speedup-threshold"},
    {"fuse", "tie-tolerance", "tie-tolerance"},
    {"fuse", "max-epilogue-length", "max-epilogue-length"},
    {"fuse", "reduction-fusion", "reduction-fusion"},
    {"fuse", "epilogue-through-layout", "epilogue-through-layout"},
    {"autotune", "prune-top-k", "prune-top-k"},
    {"autotune", "bench-runs", "bench-runs"},
    {"autotune", "warmup-runs", "warmup-runs"},
    {"autotune", "bench-sample-us", "bench-sample-us"},
    {"autotune", "split-tuning", "split-tuning"},
    {"autotune", "tie-tolerance", "tie-tolerance"},
    {"autotune", "size-hints-m", "size-hints-m"},
    {"autotune", "size-hints-bytes", "size-hints-bytes"},
    {"autotune", "decisions-from", "decisions-from"},
    {"autotune", "backend", "backend"},
    {"autotune", "seed", "seed"},
    {"autotune", "choice-timeout-ms", "choice-timeout-ms"},
};

ArrayRef<PassOptionFlag> mtsched::passOptionFlags() {
  return PassOptionFlagTable;
}

Error mtsched::applyPassOption(StringRef Pass, StringRef Key, StringRef Value) {
  std::vector<StringRef> Known;
  const PassOptionFlag *Found = nullptr;
  for (const PassOptionFlag &F : passOptionFlags()) {
    if (Pass != F.Pass)
      continue;
    Known.push_back(F.Option);
    if (Key == F.Option)
      Found = &F;
  }
  if (!Found) {
    std::string Near = nearestName(Key, Known);
    return createStringError(
        inconvertibleErrorCode(),
        "pass '" + Pass + "' has no option '" + Key + "'" +
            (!Near.empty()   ? "; did you mean '" + Near + "'?"
             : Known.empty() ? std::string("; it takes none")
                             : "; its options: " + join(Known, ", ")));
  }
  cl::Option *Opt = cl::getRegisteredOptions().lookup(Found->Flag);
  if (!Opt)
    return createStringError(inconvertibleErrorCode(),
                             "pass '" + Pass + "' option '" + Key +
                                 "': no flag --" + Found->Flag +
                                 " in this build");
  SmallVector<StringRef, 4> Values;
  if (Opt->getMiscFlags() & cl::CommaSeparated)
    Value.split(Values, ',', /*MaxSplit=*/-1, /*KeepEmpty=*/false);
  else
    Values.push_back(Value);
  for (StringRef V : Values)
    if (Opt->addOccurrence(/*pos=*/0, Found->Flag, V))
      return createStringError(inconvertibleErrorCode(),
                               "invalid value '" + V + "' for option '" + Key +
                                   "' of pass '" + Pass + "' (--" +
                                   Found->Flag + ")");
  return Error::success();
}
