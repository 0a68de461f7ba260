/* llama2.c version-0 checkpoint header and size check.
 *
 * The tensor order (token embedding, rms_att, wq, wk, wv, wo, rms_ffn, w1,
 * w2, w3, rms_final, RoPE tables, optional classifier) follows llama2.c's
 * run.c; a file is accepted only when its size matches that layout exactly,
 * which catches truncation and header/weights mismatches before any load.
 */
#include "llama2c.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "checked.h"

int llama2c_layout(struct llama2c_header *h, struct alisa_err *e)
{
    if (!h->dim || !h->hidden_dim || !h->n_layers || !h->n_heads || !h->n_kv_heads ||
        !h->vocab || !h->seq_len)
        return err_set(e, ALISA_EINVAL, "a dimension is zero");
    if (h->dim % h->n_heads)
        return err_set(e, ALISA_EINVAL, "dim %u is not a multiple of n_heads %u", h->dim,
                       h->n_heads);
    if (h->n_heads % h->n_kv_heads)
        return err_set(e, ALISA_EINVAL, "n_heads %u is not a multiple of n_kv_heads %u",
                       h->n_heads, h->n_kv_heads);
    uint64_t d = h->dim, f = h->hidden_dim, L = h->n_layers, V = h->vocab;
    uint64_t head = d / h->n_heads, kv_dim = head * h->n_kv_heads;
    /* every product checked: a hostile header must not wrap the size that
     * the file's length is compared with */
    int over = 0;
#define MUL(a, b) checked_mul((a), (b), &over)
#define ADD(a, b) checked_add((a), (b), &over)
    uint64_t per_layer = ADD(ADD(ADD(MUL(2, d), MUL(2, MUL(d, d))), MUL(2, MUL(d, kv_dim))),
                             MUL(3, MUL(d, f))); /* rms x2, wq + wo, wk + wv, w1 w2 w3 */
    uint64_t params = ADD(ADD(MUL(V, d), MUL(L, per_layer)), d); /* embedding, layers, rms_final */
    if (!h->shared_classifier)
        params = ADD(params, MUL(V, d));
    uint64_t rope = MUL(h->seq_len, head); /* real and imaginary halves */
    uint64_t bytes = ADD(7 * 4, MUL(4, ADD(params, rope)));
#undef MUL
#undef ADD
    if (over)
        return err_set(e, ALISA_EINVAL, "dim %u, hidden_dim %u, n_layers %u, vocab %u: the "
                       "weights' size overflows 64 bits", h->dim, h->hidden_dim, h->n_layers,
                       h->vocab);
    h->n_params = params;
    h->file_bytes = bytes;
    return 0;
}

int llama2c_read_header(const char *path, struct llama2c_header *out, struct alisa_err *e)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f)
        return err_set(e, ALISA_EIO, "%s: cannot open checkpoint (missing file?)", path);
    int32_t v[7];
    size_t got = fread(v, sizeof v[0], 7, f);
    struct stat st;
    int stat_ok = fstat(fileno(f), &st) == 0;
    fclose(f);
    if (got != 7)
        return err_set(e, ALISA_ECORRUPT, "%s: byte %zu: file too short for the 28-byte llama2.c header",
                       path, got * 4);
    static const char *names[7] = {"dim", "hidden_dim", "n_layers", "n_heads",
                                   "n_kv_heads", "vocab_size", "seq_len"};
    for (int i = 0; i < 7; i++)
        if (v[i] == 0 || (i != 5 && v[i] < 0) || v[i] > (1 << 24) || v[i] < -(1 << 24))
            return err_set(e, ALISA_ECORRUPT, "%s: byte %d: header field %s = %d is not plausible",
                           path, 4 * i, names[i], v[i]);
    out->dim = (uint32_t)v[0];
    out->hidden_dim = (uint32_t)v[1];
    out->n_layers = (uint32_t)v[2];
    out->n_heads = (uint32_t)v[3];
    out->n_kv_heads = (uint32_t)v[4];
    out->shared_classifier = v[5] > 0;
    out->vocab = (uint32_t)(v[5] > 0 ? v[5] : -v[5]);
    out->seq_len = (uint32_t)v[6];
    int rc = llama2c_layout(out, e);
    if (rc)
        return err_prefix(e, ALISA_ECORRUPT, "%s: header", path);
    if (!stat_ok || (uint64_t)st.st_size != out->file_bytes)
        return err_set(e, ALISA_ECORRUPT,
                       "%s: file is %lld bytes, its header implies %llu (truncated, or not a "
                       "llama2.c version-0 checkpoint)",
                       path, stat_ok ? (long long)st.st_size : -1LL,
                       (unsigned long long)out->file_bytes);
    return 0;
}
