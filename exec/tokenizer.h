/* Tokenizers: the llama2.c one (tokenizer.bin / tok512.bin: SentencePiece-
 * style BPE with merge scores and byte-fallback tokens <0x00>..<0xFF>) and
 * the byte-level BPE embedded in GGUF files (GPT-2 style: tokens + ranked
 * merges, bytes mapped to printable code points).
 *
 * Owns the vocabulary and sorted indexes for look-ups. llama2.c encoding
 * follows run.c: optional BOS, a dummy leading space, UTF-8 code points
 * (unknown ones as byte tokens), greedy merges by highest score. GGUF
 * encoding pre-splits the text (GPT-2's pattern, digits one by one as
 * SmolLM does; letters are ASCII letters and every non-ASCII byte), maps
 * bytes to code points and applies merges lowest rank first.
 */
#ifndef ALISA_TOKENIZER_H
#define ALISA_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define TOK_BOS 1 /* llama2.c's; GGUF tokenizers have their own (tok_bos) */
#define TOK_BYTE_FALLBACK_END 259 /* llama2.c: ids 3..258 are the bytes <0x00>..<0xFF> */
#define TOK_EOS 2

struct tokenizer;

/* Loads path for a model of `vocab` tokens (the file must hold exactly that
 * many): a GGUF file's embedded tokenizer when path starts with "GGUF", else
 * a llama2.c tokenizer file. On failure *out is NULL and e names the file,
 * offset and value. */
int tok_load(struct tokenizer **out, const char *path, uint32_t vocab, struct alisa_err *e);

void tok_free(struct tokenizer *t); /* accepts NULL */

/* Encodes text into ids (capacity cap; strlen(text) + 3 always suffices).
 * Returns the count, or ALISA_EINVAL when cap is too small. */
int tok_encode(const struct tokenizer *t, const char *text, int bos, uint32_t *ids, size_t cap);

/* The text of token id following token prev: byte tokens become their byte,
 * the leading space after BOS is dropped. Owned by t. Cannot fail for
 * id < vocab. *len gets the byte length (a byte token may be 0). */
const char *tok_decode(const struct tokenizer *t, uint32_t prev, uint32_t id, size_t *len);

uint32_t tok_vocab(const struct tokenizer *t);

/* The id of the beginning-of-sequence token. Cannot fail. */
uint32_t tok_bos(const struct tokenizer *t);

#endif
