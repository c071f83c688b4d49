/* test_dialect.c - the dialect table (proto/dialect.h): lookup, paths, the OpenAI entry. */
#include "config.h"
#include "proto/dialect.h"
#include "tap.h"

int main(void)
{
    const struct dialect *d = dialect_find("openai");
    TAP_OK(d == &dialect_openai, "openai: found by name");
    TAP_OK(dialect_find(NULL) == d && dialect_find("") == d, "no name: openai");
    TAP_OK(dialect_default() == d, "the default is openai");
    TAP_OK(dialect_find("OpenAI") == NULL && dialect_find("nope") == NULL, "unknown name: NULL");
    TAP_STR(d->base_url, "https://api.openai.com/v1", "openai: base URL");
    TAP_STR(d->key_env[0], "OPENAI_API_KEY", "openai: key variable");
    TAP_OK(d->key_env[1] == NULL && d->headers[0] == NULL, "openai: one key variable, no headers");
    TAP_STR(d->auth_header, "Authorization", "openai: auth header");
    TAP_STR(d->auth_prefix, "Bearer ", "openai: Bearer");
    TAP_OK(d->request_json == api_request_json && d->stream_event == api_stream_event &&
               d->decode_body == api_decode_completion && d->error_message == api_error_message,
           "openai: today's functions, unchanged");
    TAP_INT(d->retryable(529, "overloaded_error"), -1, "openai: the generic retry rules decide");

    char *p = dialect_path(d, "gpt-4o");
    TAP_STR(p, "/chat/completions", "openai: path");
    free(p);
    struct dialect g = dialect_openai;
    g.path = "/models/{model}:streamGenerateContent?alt=sse";
    p = dialect_path(&g, "gemini-2.0-flash");
    TAP_STR(p, "/models/gemini-2.0-flash:streamGenerateContent?alt=sse", "path: model put in");
    free(p);
    p = dialect_path(&g, "a/b c?d%");
    TAP_STR(p, "/models/a%2Fb%20c%3Fd%25:streamGenerateContent?alt=sse", "path: model escaped");
    free(p);
    p = dialect_path(&g, "models/gemini-2.5-pro");
    TAP_STR(p, "/models/gemini-2.5-pro:streamGenerateContent?alt=sse",
            "path: Gemini's models/NAME once, not /models/models%2F...");
    free(p);
    p = dialect_path(&g, NULL);
    TAP_STR(p, "/models/:streamGenerateContent?alt=sse", "path: no model");
    free(p);

    struct buf b = BUF_INIT;
    dialect_names(&b);
    TAP_OK(strncmp(buf_str(&b), "openai", 6) == 0, "names: openai first (%s)", buf_str(&b));
    buf_free(&b);

    /* the dialect's retry verdict folded into the code the generic rules read */
    int never = -1;
    TAP_STR(dialect_retry_code(d, 500, "server_error", &never), "server_error",
            "retry code: openai's as it is");
    TAP_INT(never, 0, "retry code: openai never forbids");
    const struct dialect *gm = dialect_find("gemini");
    if (gm) {
        TAP_STR(dialect_retry_code(gm, 200, "UNAVAILABLE", &never), "server_error",
                "retry code: a streamed error the dialect retries reads as server_error");
        TAP_INT(never, 0, "retry code: UNAVAILABLE may be retried");
        dialect_retry_code(gm, 503, "INVALID_ARGUMENT", &never);
        TAP_OK(never == 1,
               "retry code: an error the dialect never retries forbids it, whatever the status");
        TAP_STR(dialect_retry_code(gm, 429, "RESOURCE_EXHAUSTED", &never), "RESOURCE_EXHAUSTED",
                "retry code: no verdict, the generic rules decide");
        TAP_INT(never, 0, "retry code: no verdict is no veto");
        TAP_STR(dialect_retry_code(gm, 200, "RESOURCE_EXHAUSTED", &never), "rate_limit_exceeded",
                "retry code: RESOURCE_EXHAUSTED in a stream reads as a rate limit");
        TAP_INT(never, 0, "retry code: a rate limit in a stream may be retried");
    }
    const struct dialect *an = dialect_find("anthropic");
    TAP_STR(dialect_retry_code(an, 529, "overloaded_error", &never), "overloaded_error",
            "retry code: a 529 stays a 5xx for the generic rules");
    dialect_retry_code(an, 500, "invalid_request_error", &never);
    TAP_OK(never == 1,
           "retry code: anthropic's invalid_request_error is never retried");
    TAP_STR(dialect_retry_code(an, 200, "overloaded_error", &never), "overloaded",
            "retry code: an overload in a 200's stream stays an overload");
    TAP_OK(dialect_retry_code(an, 200, NULL, &never) == NULL && never == 0,
           "retry code: no code, none, and no veto");

    /* the outcome of a finished stream */
    struct api_stream st;
    api_stream_init(&st);
    struct buf m = BUF_INIT;
    strcpy(st.finish, "stop");
    TAP_INT(d->finish_outcome(&st, &m), API_OK, "openai: stop is complete");
    strcpy(st.finish, "length");
    TAP_INT(d->finish_outcome(&st, &m), API_CUT, "openai: length is cut");
    TAP_OK(strstr(buf_str(&m), "token limit") != NULL, "openai: cut message");
    buf_reset(&m);
    strcpy(st.finish, "content_filter");
    TAP_INT(d->finish_outcome(&st, &m), API_CUT, "openai: content_filter is cut");
    buf_free(&m);
    api_stream_free(&st);
    return tap_done();
}
