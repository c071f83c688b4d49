/* fuzz_api.c - the chunk decoder (api.c over jscan), the SSE-to-chunk path the network thread
 * uses, non-streamed answers and HTTP error bodies.
 *
 * Each input is used four ways: as one chunk object, as an SSE stream (split in pieces) whose
 * events go through api_stream_event, as a whole chat.completion body, and as an HTTP error
 * body under three content types. Invariants:
 *   - return values are in their documented ranges and a failure always carries a message;
 *   - every message meant for the user is terminal safe (no control or escape byte from the
 *     network) and bounded in length;
 *   - when cJSON also accepts the chunk and it has the plain shape
 *     {"choices":[{"delta":{"content":"..."}}]} (no duplicate keys), the text decoded equals
 *     cJSON's string (differential check against a reference parser). */
#include "config.h"
#include "proto/api.h"
#include "fuzz.h"
#include "proto/jscan.h"
#include "proto/sse.h"

#include <cjson/cJSON.h>
#include <string.h>

struct api_log {
    struct buf content, reasoning;
    int finishes, usages;
};

static void fuzz_api_emit(void *ud, enum api_kind kind, const char *s, size_t n)
{
    struct api_log *log = ud;
    if (kind == API_CONTENT || kind == API_REASONING) {
        FUZZ_CHECK(s != NULL && n > 0);
        buf_append(kind == API_CONTENT ? &log->content : &log->reasoning, s, n);
    } else if (kind == API_FINISH) {
        log->finishes++;
    } else if (kind == API_TOOL_CALL) {
        FUZZ_CHECK(s == NULL);
    } else {
        FUZZ_CHECK(kind == API_USAGE);
        log->usages++;
    }
}

static void fuzz_api_check_state(const struct api_stream *st)
{
    FUZZ_CHECK(memchr(st->model, '\0', sizeof st->model) != NULL);
    FUZZ_CHECK(memchr(st->finish, '\0', sizeof st->finish) != NULL);
    FUZZ_CHECK(memchr(st->error_code, '\0', sizeof st->error_code) != NULL);
    FUZZ_CHECK(fuzz_terminal_safe(buf_str(&st->error), st->error.len));
    FUZZ_CHECK(fuzz_terminal_safe(st->error_code, strlen(st->error_code)));
    FUZZ_CHECK(st->error.len <= 8192);
}

/* 1 when no two children of object o share a name. */
static int fuzz_api_unique_keys(const cJSON *o)
{
    for (const cJSON *a = o->child; a; a = a->next)
        for (const cJSON *b = a->next; b; b = b->next)
            if (a->string && b->string && strcmp(a->string, b->string) == 0)
                return 0;
    return 1;
}

/* 1 when the text holds the escape of a NUL. cJSON ends its strings at the first NUL, so a key
 * "delta\u0000" reads as "delta" to it, while the parser under test rightly takes it for another
 * key: the oracle cannot judge such a chunk. (A "\\u0000" also counts: that only skips a check.) */
static int fuzz_api_escaped_nul(const char *s, size_t n)
{
    static const char esc[] = "\\u0000";
    for (size_t i = 0; i + sizeof esc - 1 <= n; i++)
        if (memcmp(s + i, esc, sizeof esc - 1) == 0)
            return 1;
    return 0;
}

/* The content string of the plain chunk shape, or NULL when the chunk is not that shape. */
static const char *fuzz_api_plain_content(const cJSON *root)
{
    if (!cJSON_IsObject(root) || !fuzz_api_unique_keys(root))
        return NULL;
    for (const cJSON *c = root->child; c; c = c->next)
        if (strcmp(c->string, "choices") != 0 && strcmp(c->string, "id") != 0 &&
            strcmp(c->string, "model") != 0 && strcmp(c->string, "created") != 0)
            return NULL; /* error, usage, object, message: other paths */
    const cJSON *ch = cJSON_GetObjectItemCaseSensitive(root, "choices");
    if (!cJSON_IsArray(ch) || cJSON_GetArraySize(ch) != 1)
        return NULL;
    const cJSON *c0 = cJSON_GetArrayItem(ch, 0);
    if (!cJSON_IsObject(c0) || !fuzz_api_unique_keys(c0) || c0->child == NULL ||
        c0->child->next != NULL)
        return NULL;
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(c0, "delta");
    if (!cJSON_IsObject(d) || d->child == NULL || d->child->next != NULL)
        return NULL;
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(d, "content");
    return cJSON_IsString(content) ? content->valuestring : NULL;
}

static int fuzz_api_on_event(void *ud, const struct sse_event *ev)
{
    void **pair = ud;
    struct api_stream *st = pair[0];
    int r = api_stream_event(st, ev, fuzz_api_emit, pair[1]);
    FUZZ_CHECK(r >= -1 && r <= 1);
    if (r < 0)
        FUZZ_CHECK(st->error.len > 0);
    return r != 0;
}

FUZZ_ENTRY(api)
{
    const char *s = (const char *)data;

    /* 1. one chunk */
    struct api_stream st;
    struct api_log log = {BUF_INIT, BUF_INIT, 0, 0};
    api_stream_init(&st);
    int r = api_stream_chunk(&st, s, size, fuzz_api_emit, &log);
    FUZZ_CHECK(r >= -1 && r <= 1);
    if (r < 0)
        FUZZ_CHECK(st.error.len > 0);
    fuzz_api_check_state(&st);
    if (r == 0 && st.error.len == 0 && !fuzz_api_escaped_nul(s, size) &&
        !memchr(log.content.data ? log.content.data : "", '\0', log.content.len)) {
        cJSON *root = cJSON_ParseWithLength(s, size);
        const char *want = fuzz_api_plain_content(root);
        if (want) {
            FUZZ_CHECK(log.content.len == strlen(want));
            FUZZ_CHECK(memcmp(buf_str(&log.content), want, log.content.len) == 0);
        }
        cJSON_Delete(root);
    }
    api_stream_free(&st);
    buf_free(&log.content);
    buf_free(&log.reasoning);

    /* 2. an SSE stream of chunks, fed in pieces as the network thread would */
    struct api_log slog = {BUF_INIT, BUF_INIT, 0, 0};
    struct sse_parser p;
    sse_init(&p, 4096);
    api_stream_init(&st);
    void *pair[2] = {&st, &slog};
    size_t off = 0;
    int rc = 0;
    while (off < size && rc == 0) {
        size_t n = 1 + (size_t)(data[off] % 29);
        if (n > size - off)
            n = size - off;
        rc = sse_feed(&p, s + off, n, fuzz_api_on_event, pair);
        off += n;
    }
    fuzz_api_check_state(&st);

    /* 2b. the same stream as the network thread decodes it (net.c, net_feed_sse): whole events
     * of the last chunk's shape by api_stream_sse_run, the rest by the parser one event at a
     * time; in larger pieces, so that runs of whole events occur. Same text, same chunks, same
     * events, same end as 2. */
    struct api_log hlog = {BUF_INIT, BUF_INIT, 0, 0};
    struct api_stream hst;
    struct sse_parser hp;
    struct buf text = BUF_INIT;
    sse_init(&hp, 4096);
    api_stream_init(&hst);
    void *hpair[2] = {&hst, &hlog};
    int hrc = 0;
    for (off = 0; off < size && hrc == 0;) {
        size_t n = 1 + (size_t)(data[off] % 29) * 37;
        if (n > size - off)
            n = size - off;
        const char *q = s + off;
        size_t left = n;
        while (left && hrc == 0) {
            if (sse_idle(&hp) && hst.shape_kind) {
                struct api_run run = {.text = &text, .room = (size_t)-1 / 2};
                buf_reset(&text);
                size_t k = api_stream_sse_run(&hst, q, left, hp.max_event, &run);
                FUZZ_CHECK(k <= left && run.deltas <= run.events);
                FUZZ_CHECK((k > 0) == (run.events > 0));
                buf_append(run.kind == API_CONTENT ? &hlog.content : &hlog.reasoning, text.data,
                           text.len);
                sse_skipped(&hp, run.events);
                q += k;
                left -= k;
                if (!left)
                    break;
            }
            size_t k = left; /* up to the end of the next event (LF LF), as net.c feeds */
            for (const char *e = q; (e = memchr(e, '\n', (size_t)(q + left - e))) &&
                                    e + 1 < q + left; e++)
                if (e[1] == '\n') {
                    k = (size_t)(e + 2 - q);
                    break;
                }
            hrc = sse_feed(&hp, q, k, fuzz_api_on_event, hpair);
            q += k;
            left -= k;
        }
        off += n;
    }
    FUZZ_CHECK((hrc == 0) == (rc == 0));
    FUZZ_CHECK(hlog.content.len == slog.content.len &&
               memcmp(buf_str(&hlog.content), buf_str(&slog.content), slog.content.len) == 0);
    FUZZ_CHECK(hlog.reasoning.len == slog.reasoning.len &&
               memcmp(buf_str(&hlog.reasoning), buf_str(&slog.reasoning),
                      slog.reasoning.len) == 0);
    FUZZ_CHECK(hlog.finishes == slog.finishes && hlog.usages == slog.usages);
    FUZZ_CHECK(hst.chunks == st.chunks && hp.events == p.events && hst.done == st.done);
    FUZZ_CHECK(strcmp(buf_str(&hst.error), buf_str(&st.error)) == 0);
    sse_free(&hp);
    api_stream_free(&hst);
    buf_free(&text);
    buf_free(&hlog.content);
    buf_free(&hlog.reasoning);
    sse_free(&p);
    api_stream_free(&st);
    buf_free(&slog.content);
    buf_free(&slog.reasoning);

    /* jscan_plain_len: the first '"', '\\' or control byte, word at a time */
    size_t plain = jscan_plain_len(s, size), want_plain = 0;
    while (want_plain < size && s[want_plain] != '"' && s[want_plain] != '\\' &&
           (unsigned char)s[want_plain] >= 0x20)
        want_plain++;
    FUZZ_CHECK(plain == want_plain);

    /* 3. a whole non-streamed answer */
    struct api_log clog = {BUF_INIT, BUF_INIT, 0, 0};
    api_stream_init(&st);
    r = api_decode_completion(&st, s, size, fuzz_api_emit, &clog);
    FUZZ_CHECK(r == 0 || r == -1);
    if (r < 0)
        FUZZ_CHECK(st.error.len > 0);
    else /* complete, or no answer at all ({}, {"choices":[]}): then no text came either */
        FUZZ_CHECK(st.finish[0] != '\0' || (clog.content.len == 0 && clog.reasoning.len == 0));
    fuzz_api_check_state(&st);
    api_stream_free(&st);
    buf_free(&clog.content);
    buf_free(&clog.reasoning);

    /* 4. an HTTP error body */
    static const char *const ctypes[] = {NULL, "text/html; charset=utf-8", "application/json",
                                         "text/plain"};
    static const long statuses[] = {400, 401, 429, 500, 502, 301};
    for (size_t i = 0; i < sizeof ctypes / sizeof ctypes[0]; i++) {
        struct buf msg = BUF_INIT;
        char code[64];
        memset(code, 'x', sizeof code);
        long status = statuses[(size + i) % (sizeof statuses / sizeof statuses[0])];
        api_error_message(status, ctypes[i], s, size, &msg, code, sizeof code);
        FUZZ_CHECK(memchr(code, '\0', sizeof code) != NULL);
        FUZZ_CHECK(msg.len >= 8 && memcmp(msg.data, "HTTP ", 5) == 0);
        FUZZ_CHECK(fuzz_terminal_safe(msg.data, msg.len));
        FUZZ_CHECK(!memchr(msg.data, '\n', msg.len));
        FUZZ_CHECK(fuzz_terminal_safe(code, strlen(code)));
        FUZZ_CHECK(msg.len <= 8192);
        buf_free(&msg);
    }
    return 0;
}
