//===- RegisterPasses.h - The one list of all passes ------------*- C++ -*-===//
#ifndef MTSCHED_DRIVER_REGISTERPASSES_H
#define MTSCHED_DRIVER_REGISTERPASSES_H

namespace mtsched {
class PassRegistry;

/// Registers every pass, test passes included.
void registerAllPasses(PassRegistry &Registry);

} // namespace mtsched

#endif // MTSCHED_DRIVER_REGISTERPASSES_H
