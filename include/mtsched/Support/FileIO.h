//===- FileIO.h - Bounded reads of input files, checked writes --*- C++ -*-===//
//
// Every file a tool reads has a size bound, so that /dev/zero, a FIFO or a
// huge file given by mistake ends in an error instead of an allocation
// without limit; and a tool whose standard output could not be written
// (a full disk, /dev/full, a closed pipe) says so and exits 1 instead of 0.
// The limits are documented in docs/PASSES.md ("Input size limits").
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_SUPPORT_FILEIO_H
#define MTSCHED_SUPPORT_FILEIO_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"
#include <cstdint>
#include <memory>
#include <string>

namespace mtsched {

/// The largest IR file (or standard input) a tool reads, and the largest
/// --report JSON mtsched-calibrate reads: both grow with the graph.
inline constexpr uint64_t MaxIRFileBytes = uint64_t(256) << 20;
/// The largest small configuration file: a --device JSON, a --choices-file.
inline constexpr uint64_t MaxConfigFileBytes = uint64_t(4) << 20;

/// "256 MiB", "4 MiB", "100 bytes": a limit as messages name it.
std::string formatByteLimit(uint64_t Bytes);

/// Reads \p Path ("-" is standard input, named "<stdin>") whole, or fails if
/// it holds more than \p MaxBytes bytes: "file too large: more than 4 MiB,
/// the limit for WHAT". A regular file's size is checked before anything is
/// read; anything else (a pipe, a character device such as /dev/zero) is
/// read in chunks and stops one byte past the limit. An error opening or
/// reading the file carries its std::error_code message ("No such file or
/// directory"); the caller adds which file it was.
llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
readBoundedFile(llvm::StringRef Path, uint64_t MaxBytes, llvm::StringRef What);

/// Flushes llvm::outs() and, if anything written to it was lost, prints
/// "TOOL: error: cannot write standard output: MESSAGE" on stderr and
/// returns false. The stream's error is cleared either way, so that its
/// destructor does not abort; the verdict does not depend on stderr being
/// writable.
bool checkStdoutWritten(llvm::StringRef ToolName);

} // namespace mtsched

#endif // MTSCHED_SUPPORT_FILEIO_H
