/* Model loading for the executor commands (contract in cli_exec.h): the
 * catalog resolves a name to its checkpoint and tokenizer files.
 */
#include "cli_exec.h"

#include <stdio.h>
#include <string.h>

#include "catalog.h"

void loaded_free(struct loaded *l)
{
    llm_free(l->m);
    tok_free(l->t);
}

int load_model(struct loaded *l, const char *model, const char *tokenizer, int with_tokenizer,
               struct alisa_err *e)
{
    memset(l, 0, sizeof *l);
    char tok_path[600] = "";
    snprintf(l->model_path, sizeof l->model_path, "%s", model);
    struct catalog c;
    if (!strchr(model, '/') && catalog_load(&c, catalog_default_dir(), catalog_models_dir(), e) == 0) {
        const struct model_shape *s = catalog_model(&c, model);
        if (s && s->checkpoint[0]) {
            snprintf(l->model_path, sizeof l->model_path, "%s/%s", catalog_models_dir(),
                     s->checkpoint);
            if (s->tokenizer[0])
                snprintf(tok_path, sizeof tok_path, "%s/%s", catalog_models_dir(), s->tokenizer);
        }
        catalog_deinit(&c);
    }
    if (tokenizer)
        snprintf(tok_path, sizeof tok_path, "%s", tokenizer);
    int rc = llm_load(&l->m, l->model_path, e);
    if (rc || !with_tokenizer)
        return rc;
    size_t pl = strlen(l->model_path);
    if (!tok_path[0] && pl > 5 && strcmp(l->model_path + pl - 5, ".gguf") == 0)
        snprintf(tok_path, sizeof tok_path, "%s", l->model_path); /* tokenizer inside */
    if (!tok_path[0])
        rc = err_set(e, ALISA_EINVAL, "%s: no tokenizer known for this model (pass --tokenizer)",
                     l->model_path);
    if (!rc)
        rc = tok_load(&l->t, tok_path, l->m->c.vocab, e);
    if (rc)
        loaded_free(l);
    return rc;
}
