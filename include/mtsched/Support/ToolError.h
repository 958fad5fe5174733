//===- ToolError.h - One prefix for errors without a location ---*- C++ -*-===//
//
// An error about a file position is `file:line:col: error: ...` (SourceMgr);
// every other error a tool prints starts `<tool>: error: ...`, as
// `mtsched-opt: error: cannot open input file 'x'`. Every such path goes
// through toolError(), so that no message starts a bare `error:`.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_SUPPORT_TOOLERROR_H
#define MTSCHED_SUPPORT_TOOLERROR_H

#include "llvm/ADT/StringRef.h"

namespace llvm {
class raw_ostream;
class Twine;
} // namespace llvm

namespace mtsched {

/// The tool named in error prefixes (default "mtsched-opt"); a tool's main
/// sets it once, before any thread starts.
void setErrorToolName(llvm::StringRef ToolName);

/// Starts an error line on stderr: `<tool>: error: ` (coloured on a
/// terminal). The caller writes the message and the newline.
llvm::raw_ostream &toolError();

/// Prints `<tool>: error: Msg` and a newline to stderr in one write, so
/// that ranks of several processes do not interleave their lines.
void reportToolError(const llvm::Twine &Msg);

} // namespace mtsched

#endif // MTSCHED_SUPPORT_TOOLERROR_H
