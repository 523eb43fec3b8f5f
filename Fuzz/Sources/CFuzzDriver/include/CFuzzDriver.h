// Why this target exists: libFuzzer's entry for a program with a main of its
// own (SwiftPM gives every executable one), declared for Swift. It is defined
// by libFuzzer's runtime, linked only by `make fuzz` (-sanitize=fuzzer); the
// plain build never calls it.
#ifndef CFUZZDRIVER_H
#define CFUZZDRIVER_H

#include <stddef.h>
#include <stdint.h>

/// Runs libFuzzer with the command line (its flags, corpus folders) over `callback`.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
