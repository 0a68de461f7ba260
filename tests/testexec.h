/* Helpers for the executor's tests: a real model loaded, or the test
 * skipped when its file is absent (a failure under CI=true, where
 * ../shared/models must be there). Test-only: failures abort the test.
 */
#ifndef ALISA_TESTEXEC_H
#define ALISA_TESTEXEC_H

#include "model.h"

/* stories260K's llama2.c checkpoint under tu_models_dir(), in a static
 * buffer. */
const char *tu_stories260k(void);

/* The model at path with its weights held as mode; skips the test when the
 * file cannot be read (fails it under CI=true) and fails it when the load
 * does. The caller frees it with llm_free. */
struct llm_model *tu_model_or_skip(const char *path, enum llm_weight_mode mode);

#endif
