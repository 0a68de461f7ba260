/* llama2.c checkpoint loading (contract in model.h). The tensor order is
 * llama2c.c's; the RoPE tables stored after rms_final are skipped (RoPE is
 * computed from rope_theta). The file hash uses OpenSSL's SHA-256.
 */
#include "model.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama2c.h"

int llm_file_sha256(const char *path, char out[65], struct alisa_err *e)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return err_set(e, ALISA_EIO, "%s: cannot open", path);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int rc = 0;
    if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
        rc = err_set(e, ALISA_ENOMEM, "%s: cannot start SHA-256", path);
    } else {
        unsigned char buf[65536];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, f)) > 0)
            EVP_DigestUpdate(ctx, buf, n);
        if (ferror(f))
            rc = err_set(e, ALISA_EIO, "%s: read failed", path);
        unsigned char md[32];
        unsigned int len = 0;
        if (!rc && EVP_DigestFinal_ex(ctx, md, &len) == 1 && len == 32)
            for (int i = 0; i < 32; i++)
                snprintf(out + 2 * i, 3, "%02x", md[i]);
        else if (!rc)
            rc = err_set(e, ALISA_EIO, "%s: SHA-256 failed", path);
    }
    EVP_MD_CTX_free(ctx);
    fclose(f);
    return rc;
}

void llm_free(struct llm_model *m)
{
    if (!m)
        return;
    free(m->data);
    free(m);
}

int llm_load_llama2c(struct llm_model **out, const char *path, struct alisa_err *e)
{
    *out = NULL;
    struct llama2c_header h;
    int rc = llama2c_read_header(path, &h, e);
    if (rc)
        return rc;
    struct llm_model *m = calloc(1, sizeof *m);
    if (!m)
        return err_set(e, ALISA_ENOMEM, "out of memory");
    struct llm_config *c = &m->c;
    c->dim = h.dim;
    c->hidden_dim = h.hidden_dim;
    c->n_layers = h.n_layers;
    c->n_heads = h.n_heads;
    c->n_kv_heads = h.n_kv_heads;
    c->vocab = h.vocab;
    c->seq_len = h.seq_len;
    c->head_dim = h.dim / h.n_heads;
    c->kv_dim = c->head_dim * h.n_kv_heads;
    c->rope_theta = 10000.0f;
    c->norm_eps = 1e-5f;
    const char *slash = strrchr(path, '/');
    snprintf(m->name, sizeof m->name, "%s", slash ? slash + 1 : path);
    if ((rc = llm_file_sha256(path, m->sha256, e))) {
        llm_free(m);
        return rc;
    }
    /* weights without the RoPE tables: n_params floats, read in two parts */
    size_t n = (size_t)h.n_params;
    m->data = malloc(n * sizeof(float));
    FILE *f = fopen(path, "rb");
    if (!m->data || !f) {
        int status = m->data ? ALISA_EIO : ALISA_ENOMEM;
        if (f)
            fclose(f);
        llm_free(m);
        return err_set(e, status, "%s: cannot read weights", path);
    }
    uint64_t L = c->n_layers, d = c->dim, hd = c->hidden_dim, kv = c->kv_dim, V = c->vocab;
    size_t before_rope = V * d + L * d + L * d * d + 2 * L * d * kv + L * d * d + L * d +
                         3 * L * d * hd + d;
    size_t rope = (size_t)c->seq_len * c->head_dim;
    int ok = fseek(f, 28, SEEK_SET) == 0 &&
             fread(m->data, sizeof(float), before_rope, f) == before_rope;
    if (ok && !h.shared_classifier)
        ok = fseek(f, (long)(rope * sizeof(float)), SEEK_CUR) == 0 &&
             fread(m->data + before_rope, sizeof(float), V * d, f) == V * d;
    fclose(f);
    if (!ok) {
        llm_free(m);
        return err_set(e, ALISA_ECORRUPT, "%s: weights could not be read (truncated?)", path);
    }
    float *p = m->data;
    struct llm_weights *w = &m->w;
    w->token_embedding = p; p += V * d;
    w->rms_att = p; p += L * d;
    w->wq = p; p += L * d * d;
    w->wk = p; p += L * kv * d;
    w->wv = p; p += L * kv * d;
    w->wo = p; p += L * d * d;
    w->rms_ffn = p; p += L * d;
    w->w1 = p; p += L * hd * d;
    w->w2 = p; p += L * d * hd;
    w->w3 = p; p += L * hd * d;
    w->rms_final = p; p += d;
    w->wcls = h.shared_classifier ? w->token_embedding : p;
    *out = m;
    return 0;
}
