/* Fuzz harnesses, one per parser (tests/fuzz/README.md): each fuzz_*.c
 * defines LLVMFuzzerTestOneInput, which hands the input to the parser the
 * way the CLI does (from a file) and must return without a crash, a
 * sanitizer report or unbounded memory, whatever the bytes.
 *
 * Built two ways: with clang's -fsanitize=fuzzer for `make fuzz`, and with
 * fuzz_replay.c as main() for ctest, which replays the committed corpus
 * (tests/fuzz/corpus/TARGET/) so every past finding stays a regression test.
 */
#ifndef ALISA_FUZZ_H
#define ALISA_FUZZ_H

#include <stddef.h>
#include <stdint.h>

/* Writes data to this process's scratch file (under $TMPDIR or /tmp, named
 * with suffix, e.g. ".gguf") and returns its path; the same path every
 * call. Aborts when the file cannot be written (the harness cannot run). */
const char *fuzz_file(const uint8_t *data, size_t size, const char *suffix);

/* Reads len bytes at s, as the CLI does when it prints a decoded piece, so
 * a piece pointing outside its tokenizer is a sanitizer report here. */
void fuzz_read(const char *s, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
