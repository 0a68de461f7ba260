/* Model loading shared by the executor commands (run, eval, record,
 * calibrate): a catalog name or a file, and its tokenizer.
 */
#ifndef ALISA_CLI_EXEC_H
#define ALISA_CLI_EXEC_H

#include "err.h"
#include "model.h"
#include "tokenizer.h"

/* A loaded model and its tokenizer (NULL when not asked for). */
struct loaded {
    struct llm_model *m;
    struct tokenizer *t;
    char model_path[600];
};

/* Loads model (a catalog name with a checkpoint, or a llama2.c .bin or GGUF
 * path) and, when with_tokenizer, its tokenizer: tokenizer when given, else
 * the catalog's, else the one inside a GGUF file. On failure l is empty and
 * e says why. */
int load_model(struct loaded *l, const char *model, const char *tokenizer, int with_tokenizer,
               struct alisa_err *e);

void loaded_free(struct loaded *l); /* accepts an empty l */

#endif
