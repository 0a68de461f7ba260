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

/* Multi-file inputs (a checkpoint directory, a model and its tokenizer, a
 * catalog with a profile and a spec): data is a sequence of files, each
 * introduced by a line "==> NAME <==" (as head(1) prints several files) at
 * the start of the input or after a newline, which belongs to the header:
 * a file's bytes run from after its header line to the newline before the
 * next header, or the end. Bytes before the first header are ignored. NAME
 * is 1 to 64 of [A-Za-z0-9._-], not "." or "..", so no file lands outside
 * the directory; a header with any other name is part of the previous
 * file's bytes. Empties this process's scratch directory (under $TMPDIR or
 * /tmp), writes the files into it, up to FUZZ_MAX_FILES (a later file of
 * the same name replaces the earlier), and returns the directory's path.
 * Aborts when a file cannot be written. */
#define FUZZ_MAX_FILES 16
const char *fuzz_dir(const uint8_t *data, size_t size);

/* The bytes of file NAME in a multi-file input (the last one so named):
 * *at gets its offset in data, *len its length; 0 when data has no such
 * file. For custom mutators that mutate one file of several. */
int fuzz_dir_find(const uint8_t *data, size_t size, const char *name, size_t *at, size_t *len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* libFuzzer's byte-level mutator, for the custom mutators (mutate.h) to
 * fall back on; they are built only with -DALISA_FUZZ=ON (ALISA_FUZZING),
 * the corpus replay needs none. */
#ifdef ALISA_FUZZING
size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed);
#endif

#endif
