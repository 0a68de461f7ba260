/* Structure-aware mutation of GGUF files and traces, for the harnesses'
 * custom mutators (libFuzzer's LLVMFuzzerCustomMutator): byte flips rarely
 * get past a parser's framing (a trace chunk's CRC-32, a GGUF string's
 * length), so these change fields the loaders read and keep the framing
 * valid, and the fuzzer reaches the loaders and the forward pass.
 *
 * Each takes an input of size bytes in a buffer of max_size, changes it in
 * place according to seed (deterministic in it) and returns the new size
 * (at most max_size), or 0 when the input does not parse far enough to be
 * mutated by structure (the caller then mutates bytes).
 *
 * GGUF: one of: a scalar value or numeric array element set to a boundary
 * value (0, 1, powers of two and their neighbours, the type's maximum,
 * NaN, infinities, the value doubled or halved), a key renamed to one the
 * loaders read, a string value or key resized, a tensor's dimension, type
 * or offset set to a boundary value, a weight in the data set to a
 * non-finite or extreme value. The header's counts, every string's and
 * array's length prefix and the value types stay consistent.
 *
 * Trace: one of: a 4- or 2-byte field of a chunk's payload set to a
 * boundary or non-finite value, a byte flipped, a chunk dropped,
 * duplicated, swapped with the next or cut short; then every chunk's
 * CRC-32 is recomputed (fuzz_trace_fix_crc), so the reader gets past it. */
#ifndef ALISA_FUZZ_MUTATE_H
#define ALISA_FUZZ_MUTATE_H

#include <stddef.h>
#include <stdint.h>

size_t fuzz_mutate_gguf(uint8_t *data, size_t size, size_t max_size, unsigned seed);
size_t fuzz_mutate_trace(uint8_t *data, size_t size, size_t max_size, unsigned seed);

/* Recomputes the CRC-32 of every whole chunk of a trace (after a byte-level
 * mutation, too). Returns the chunks fixed; 0 when data is no trace. */
int fuzz_trace_fix_crc(uint8_t *data, size_t size);

#endif
