/* dialect.c - the table of provider dialects (proto/dialect.h) and the OpenAI entry. */
#include "config.h"
#include "proto/dialect.h"
#include "base/xmalloc.h"

#include <string.h>

/* Chat completions leaves retries to the generic rules (ratelimit_should_retry). */
static int dialect_openai_retryable(long status, const char *code)
{
    (void)status;
    (void)code;
    return -1;
}

const struct dialect dialect_openai = {
    .name = "openai",
    .base_url = "https://api.openai.com/v1",
    .model = "gpt-4o-mini",
    .base_env = "OPENAI_BASE_URL",
    .key_env = {"OPENAI_API_KEY"},
    .path = "/chat/completions",
    .models_path = "/models",
    .auth_header = "Authorization",
    .auth_prefix = "Bearer ",
    .request_json = api_request_json,
    .stream_event = api_stream_event,
    .decode_body = api_decode_completion,
    .error_message = api_error_message,
    .retryable = dialect_openai_retryable,
    .finish_outcome = api_finish_outcome,
};

/* Every dialect, the default first. A new one is one line here and its entry. */
static const struct dialect *const dialects[] = {
    &dialect_openai,
    &dialect_anthropic,
    &dialect_gemini,
    &dialect_responses,
};
#define N_DIALECTS (sizeof dialects / sizeof dialects[0])

const struct dialect *dialect_find(const char *name)
{
    if (!name || !*name)
        return dialects[0];
    for (size_t i = 0; i < N_DIALECTS; i++)
        if (strcmp(dialects[i]->name, name) == 0)
            return dialects[i];
    return NULL;
}

int dialect_model_foreign(const struct dialect *d, const char *model)
{
    static const struct {
        const char *prefix;
        const struct dialect *owner; /* its default base URL is the provider's own API */
    } families[] = {
        {"gpt-", &dialect_openai},     {"chatgpt-", &dialect_openai}, {"o1", &dialect_openai},
        {"o3", &dialect_openai},       {"o4", &dialect_openai},
        {"claude-", &dialect_anthropic}, {"gemini-", &dialect_gemini}, {"gemma-", &dialect_gemini},
    };
    for (size_t i = 0; model && i < sizeof families / sizeof families[0]; i++)
        if (strncmp(model, families[i].prefix, strlen(families[i].prefix)) == 0)
            return strcmp(families[i].owner->base_url, d->base_url) != 0;
    return 0;
}

const struct dialect *dialect_at(size_t i)
{
    return i < N_DIALECTS ? dialects[i] : NULL;
}

const struct dialect *dialect_default(void)
{
    return dialects[0];
}

void dialect_names(struct buf *out)
{
    for (size_t i = 0; i < N_DIALECTS; i++)
        buf_printf(out, "%s%s", i ? "|" : "", dialects[i]->name);
}

const char *dialect_retry_code(const struct dialect *d, long status, const char *code,
                               int *never)
{
    int verdict = d->retryable ? d->retryable(status, code) : -1;
    *never = verdict == 0;
    if (verdict == 2 && status >= 200 && status <= 299)
        return "rate_limit_exceeded";
    if (verdict == 2)
        return code;
    if (verdict == 1 && status >= 200 && status <= 299)
        return code && strstr(code, "overloaded") ? "overloaded" : "server_error";
    return code;
}

char *dialect_path(const struct dialect *d, const char *model)
{
    static const char hex[] = "0123456789ABCDEF";
    struct buf b = BUF_INIT;
    const char *p = d->path, *at;
    while ((at = strstr(p, "{model}")) != NULL) {
        buf_append(&b, p, (size_t)(at - p));
        const char *name = model ? model : "";
        /* Gemini's own name for a model, "models/gemini-2.5-pro", in a path that has the
         * "models/" already (until 2026-12: /models/models%2Fgemini-2.5-pro, a 404) */
        if (at - p >= 7 && strncmp(at - 7, "models/", 7) == 0 && strncmp(name, "models/", 7) == 0)
            name += 7;
        for (const unsigned char *m = (const unsigned char *)name; *m; m++) {
            if ((*m >= 'A' && *m <= 'Z') || (*m >= 'a' && *m <= 'z') ||
                (*m >= '0' && *m <= '9') || strchr("._~-", *m)) {
                buf_appendc(&b, (char)*m);
            } else {
                buf_appendc(&b, '%');
                buf_appendc(&b, hex[*m >> 4]);
                buf_appendc(&b, hex[*m & 15]);
            }
        }
        p = at + 7;
    }
    buf_appends(&b, p);
    return buf_take(&b);
}
