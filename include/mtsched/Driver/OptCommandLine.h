//===- OptCommandLine.h - mtsched-opt's command line ------------*- C++ -*-===//
//
// The whole of mtsched-opt behind one call, as MLIR's MlirOptMain: the tool
// itself is a few lines that call it.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_DRIVER_OPTCOMMANDLINE_H
#define MTSCHED_DRIVER_OPTCOMMANDLINE_H

namespace mtsched {

/// Parses mtsched-opt's command line into an OptMainConfig (a bad flag
/// value exits with status 1 and says why), runs optMain and ends the rank
/// process. Unless --free-on-exit is given (or the build is sanitized), it
/// then exits the process itself, leaving what it holds to the OS
/// (OptMainConfig::DisableFree); otherwise it returns the exit status.
int optMainFromCommandLine(int argc, char **argv);

} // namespace mtsched

#endif // MTSCHED_DRIVER_OPTCOMMANDLINE_H
