/* fuzz_dialect.c - every provider dialect of proto/dialect.h (anthropic.c, and each one added
 * to the table) over the same input: as an SSE stream fed in input-chosen pieces, as a whole
 * non-streamed body, as an HTTP error body, and as the text of a request. Invariants:
 *   - return values are in their documented ranges and a failure always carries a message;
 *   - the stream state's strings are terminated, its messages and the server's stop reason
 *     terminal safe and bounded;
 *   - a finish is set only with API_FINISH announced, and its outcome is API_OK or API_CUT;
 *   - a whole body that decodes has a finish, or no text at all;
 *   - an HTTP error message is one terminal-safe line starting "HTTP ";
 *   - a request body is valid JSON whatever the message text. */
#include "config.h"
#include "proto/dialect.h"
#include "fuzz.h"
#include "proto/sse.h"

#include <cjson/cJSON.h>
#include <string.h>

struct dialect_log {
    size_t text;
    int finishes;
};

static void fuzz_dialect_emit(void *ud, enum api_kind kind, const char *s, size_t n)
{
    struct dialect_log *log = ud;
    if (kind == API_CONTENT || kind == API_REASONING) {
        FUZZ_CHECK(s != NULL && n > 0);
        log->text += n;
    } else if (kind == API_FINISH) {
        log->finishes++;
    } else if (kind == API_TOOL_CALL) {
        FUZZ_CHECK(s == NULL);
    } else {
        FUZZ_CHECK(kind == API_USAGE);
    }
}

static void fuzz_dialect_check(const struct dialect *d, const struct api_stream *st,
                               const struct dialect_log *log)
{
    FUZZ_CHECK(memchr(st->model, '\0', sizeof st->model) != NULL);
    FUZZ_CHECK(memchr(st->finish, '\0', sizeof st->finish) != NULL);
    FUZZ_CHECK(memchr(st->finish_detail, '\0', sizeof st->finish_detail) != NULL);
    FUZZ_CHECK(memchr(st->error_code, '\0', sizeof st->error_code) != NULL);
    FUZZ_CHECK(fuzz_terminal_safe(buf_str(&st->error), st->error.len));
    FUZZ_CHECK(fuzz_terminal_safe(st->error_code, strlen(st->error_code)));
    FUZZ_CHECK(fuzz_terminal_safe(st->finish_detail, strlen(st->finish_detail)));
    FUZZ_CHECK(st->error.len <= 8192);
    FUZZ_CHECK(!st->finish[0] || log->finishes > 0);
    if (st->finish[0]) {
        struct buf msg = BUF_INIT;
        enum api_outcome o = d->finish_outcome(st, &msg);
        FUZZ_CHECK(o == API_OK || o == API_CUT);
        FUZZ_CHECK(o == API_OK || msg.len > 0);
        FUZZ_CHECK(fuzz_terminal_safe(msg.data ? msg.data : "", msg.len));
        buf_free(&msg);
    }
}

struct dialect_run {
    const struct dialect *d;
    struct api_stream st;
    struct dialect_log log;
};

static int fuzz_dialect_on_event(void *ud, const struct sse_event *ev)
{
    struct dialect_run *run = ud;
    int r = run->d->stream_event(&run->st, ev, fuzz_dialect_emit, &run->log);
    FUZZ_CHECK(r >= -1 && r <= 1);
    if (r < 0)
        FUZZ_CHECK(run->st.error.len > 0);
    return r != 0;
}

FUZZ_ENTRY(dialect)
{
    const char *s = (const char *)data;
    for (size_t di = 0; dialect_at(di); di++) {
        const struct dialect *d = dialect_at(di);

        /* 1. an SSE stream fed in pieces, as the network thread would */
        struct dialect_run run = {.d = d};
        api_stream_init(&run.st);
        struct sse_parser p;
        sse_init(&p, 4096);
        size_t off = 0;
        int rc = 0;
        while (off < size && rc == 0) {
            size_t n = 1 + (size_t)(data[off] % 31);
            if (n > size - off)
                n = size - off;
            rc = sse_feed(&p, s + off, n, fuzz_dialect_on_event, &run);
            off += n;
        }
        fuzz_dialect_check(d, &run.st, &run.log);
        sse_free(&p);
        api_stream_free(&run.st);

        /* 2. a whole non-streamed answer */
        struct dialect_log blog = {0, 0};
        struct api_stream st;
        api_stream_init(&st);
        int r = d->decode_body(&st, s, size, fuzz_dialect_emit, &blog);
        FUZZ_CHECK(r == 0 || r == -1);
        if (r < 0)
            FUZZ_CHECK(st.error.len > 0);
        else
            FUZZ_CHECK(st.finish[0] != '\0' || blog.text == 0);
        fuzz_dialect_check(d, &st, &blog);
        api_stream_free(&st);

        /* 3. an HTTP error body */
        static const long statuses[] = {400, 401, 429, 500, 529};
        struct buf msg = BUF_INIT;
        char code[64];
        memset(code, 'x', sizeof code);
        long status = statuses[(size + di) % (sizeof statuses / sizeof statuses[0])];
        d->error_message(status, "application/json", s, size, &msg, code, sizeof code);
        FUZZ_CHECK(memchr(code, '\0', sizeof code) != NULL);
        FUZZ_CHECK(msg.len >= 8 && memcmp(msg.data, "HTTP ", 5) == 0);
        FUZZ_CHECK(fuzz_terminal_safe(msg.data, msg.len) && !memchr(msg.data, '\n', msg.len));
        FUZZ_CHECK(msg.len <= 8192);
        int retry = d->retryable(status, code);
        FUZZ_CHECK(retry >= -1 && retry <= 1);
        buf_free(&msg);
    }

    /* 4. the input as message text (up to a NUL) in a request of every dialect */
    size_t tn = strnlen(s, size);
    char *text = malloc(tn + 1);
    FUZZ_CHECK(text != NULL);
    memcpy(text, s, tn);
    text[tn] = '\0';
    struct api_message m[] = {API_MSG("system", text), API_MSG("user", text), API_MSG("user", ""),
                              API_MSG("assistant", text), API_MSG("user", text)};
    struct api_request rq = {.model = text, .messages = m, .n_messages = 5, .stream = 1};
    for (size_t di = 0; dialect_at(di); di++) {
        char *body = dialect_at(di)->request_json(&rq);
        cJSON *o = cJSON_Parse(body);
        FUZZ_CHECK(cJSON_IsObject(o));
        cJSON_Delete(o);
        free(body);
        char *path = dialect_path(dialect_at(di), text);
        FUZZ_CHECK(path != NULL && !strpbrk(path, " \r\n"));
        free(path);
    }
    free(text);
    return 0;
}
