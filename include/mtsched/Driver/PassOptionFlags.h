//===- PassOptionFlags.h - Pass options as mtsched-opt flags ----*- C++ -*-===//
//
// mlir-opt's pass options (`fuse{heuristic=never}`) name the driver's flags
// of what the pass does. This is the table of which option of which pass is
// which flag, and the one call that sets the flag from the option.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_DRIVER_PASSOPTIONFLAGS_H
#define MTSCHED_DRIVER_PASSOPTIONFLAGS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace mtsched {

/// Option Option of pass Pass sets the registered flag --Flag.
struct PassOptionFlag {
  const char *Pass;
  const char *Option;
  const char *Flag;
};

/// Every pass option mtsched-opt knows.
llvm::ArrayRef<PassOptionFlag> passOptionFlags();

/// Sets the flag behind option Key of pass Pass to Value for the whole run,
/// as the flag itself would (a comma-separated flag takes each value). The
/// error names the pass's options, or the nearest one, where Key is none of
/// them, and the flag where Value is not one of its values.
llvm::Error applyPassOption(llvm::StringRef Pass, llvm::StringRef Key,
                            llvm::StringRef Value);

} // namespace mtsched

#endif // MTSCHED_DRIVER_PASSOPTIONFLAGS_H
