/* test_api.c - chunk decoding for each provider dialect, error bodies, request JSON. */
#include "config.h"
#include "proto/api.h"
#include "base/cpu.h"
#include "fixture.h"
#include "got.h"
#include "proto/sse.h"

#include <cjson/cJSON.h>
#if defined(__GNUC__) && defined(__x86_64__)
#include <cpuid.h>
#endif

static void decode_text(struct got *g, const char *s, size_t n)
{
    got_decode(g, api_stream_event, s, n, n);
}

static void decode(struct got *g, const char *name)
{
    size_t n;
    char *s = fixture_read(name, &n);
    decode_text(g, s, n);
    free(s);
}

static void chunk(struct got *g, const char *json)
{
    memset(g, 0, sizeof *g);
    api_stream_init(&g->st);
    g->ret = api_stream_chunk(&g->st, json, strlen(json), got_emit, g);
}

static void error_msg(long status, const char *ctype, const char *body, const char *want,
                      const char *want_code, const char *name)
{
    struct buf m = BUF_INIT;
    char code[64];
    api_error_message(status, ctype, body, strlen(body), &m, code, sizeof code);
    TAP_STR(buf_str(&m), want, name);
    if (want_code)
        TAP_STR(code, want_code, "error code");
    buf_free(&m);
}

/* A stream of chunks decoded by one decoder (which reuses the last plain chunk's shape) must
 * give exactly what a fresh decoder gives for each chunk alone (a full walk every time). */
static void test_shapes(void)
{
#define PRE "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0," \
            "\"delta\":{\"content\":\""
#define POST "\"},\"finish_reason\":null}]}"
    static const char *const chunks[] = {
        PRE "ab" POST,
        PRE "cd" POST,                                   /* same shape */
        PRE "e\\\"f\\\\" POST,                           /* escapes, ends in an escaped \ */
        PRE "\\u00e9 \\ud83d\\ude00" POST,               /* \u escapes and a pair */
        PRE "x\\\"},\\\"finish_reason\\\":\\\"stop" POST, /* text that looks like members */
        PRE "a\",\"refusal\":\"b" POST,                   /* same bytes around, two strings */
        PRE "" POST,                                     /* empty text: nothing */
        PRE "g" POST,
        PRE "tab\there" POST,                            /* raw control byte: malformed */
        PRE "h" "\"},\"finish_reason\":\"stop\"}]}",       /* the finish: another shape */
        PRE "i" POST,
        "{\"id\":\"chatcmpl-1\",\"choices\":[],\"usage\":{\"prompt_tokens\":1,"
        "\"completion_tokens\":2,\"total_tokens\":3}}",
        PRE "j" POST,
        "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,"
        "\"delta\":{\"reasoning_content\":\"think\"},\"finish_reason\":null}]}",
        "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,"
        "\"delta\":{\"reasoning_content\":\"more\"},\"finish_reason\":null}]}",
        PRE "k" POST "  ",                               /* trailing blanks: other bytes */
        PRE "k2" POST "  ",
    };
#undef PRE
#undef POST
    struct got seq;
    memset(&seq, 0, sizeof seq);
    api_stream_init(&seq.st);
    for (size_t i = 0; i < sizeof chunks / sizeof *chunks; i++) {
        struct got one;
        chunk(&one, chunks[i]);
        size_t c0 = seq.content.len, r0 = seq.reasoning.len;
        int f0 = seq.finishes, u0 = seq.usages;
        seq.ret = api_stream_chunk(&seq.st, chunks[i], strlen(chunks[i]), got_emit, &seq);
        char name[64];
        snprintf(name, sizeof name, "chunk %zu decoded in a stream = alone", i);
        int same = seq.ret == one.ret && seq.content.len - c0 == one.content.len &&
                   (!one.content.len ||
                    memcmp(seq.content.data + c0, one.content.data, one.content.len) == 0) &&
                   seq.reasoning.len - r0 == one.reasoning.len &&
                   (!one.reasoning.len ||
                    memcmp(seq.reasoning.data + r0, one.reasoning.data, one.reasoning.len) == 0) &&
                   seq.finishes - f0 == one.finishes && seq.usages - u0 == one.usages;
        TAP_OK(same, "%s", name);
        if (!same)
            printf("# alone: ret %d content '%s'; in the stream: ret %d content '%.*s'\n",
                   one.ret, buf_str(&one.content), seq.ret, (int)(seq.content.len - c0),
                   seq.content.data + c0);
        got_free(&one);
    }
    TAP_STR(buf_str(&seq.content), "abcde\"f\\\xc3\xa9 \xf0\x9f\x98\x80x\"},\"finish_reason\":\"stop"
            "abghijkk2", "the stream's text");
    TAP_INT(seq.st.chunks, (long)(sizeof chunks / sizeof *chunks), "every chunk counted");
    got_free(&seq);
}

/* api_stream_sse_run: whole `data:` events of the last chunk's shape are decoded without the
 * SSE parser, as the parser and api_stream_event would decode them; it stops, consuming
 * nothing more, at the first event that is anything else. */
static void test_sse_run(void)
{
#define PRE "{\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\""
#define POST "\"},\"finish_reason\":null}]}"
#define EV(text) "data: " PRE text POST "\n\n"
    struct api_stream st;
    struct buf text = BUF_INIT;
    struct got g;
    chunk(&g, PRE "a" POST); /* the first chunk gives the shape */
    struct api_run r = {.text = &text, .room = 100};
    static const char s1[] = EV("b") EV("") "data:" PRE "c\\n" POST "\n\n" EV("d");
    size_t k = api_stream_sse_run(&g.st, s1, sizeof s1 - 1, 1 << 20, &r);
    TAP_INT(k, sizeof s1 - 1, "run: four events of the shape, all consumed");
    TAP_STR(buf_str(&text), "bc\nd", "run: their text, unescaped");
    TAP_INT(r.events, 4, "run: four events");
    TAP_INT(r.deltas, 3, "run: three with text (an empty one is no delta)");
    TAP_INT(r.kind, API_CONTENT, "run: content");
    TAP_INT(g.st.chunks, 5, "run: the chunks counted as api_stream_chunk counts them");
    static const char *const stops[] = {
        EV("e") "data: " PRE "f" POST "\r\n\r\n",          /* CRLF: the parser's */
        EV("e") "event: x\n" EV("f"),                       /* another field */
        EV("e") "data: " PRE "f" POST "\ndata: x\n\n",      /* two data lines */
        EV("e") "data: " PRE "f\"},\"finish_reason\":\"stop\"}]}\n\n", /* another shape */
        EV("e") "data: " PRE "f\tg" POST "\n\n",           /* raw control byte: malformed */
        EV("e") "data: " PRE "f" POST "\n",                 /* not whole yet */
        EV("e") ": keep-alive\n\n" EV("f"),                 /* a comment */
        EV("e") "data: [DONE]\n\n",
    };
    for (size_t i = 0; i < sizeof stops / sizeof *stops; i++) {
        buf_reset(&text);
        k = api_stream_sse_run(&g.st, stops[i], strlen(stops[i]), 1 << 20, &r);
        TAP_OK(k == strlen(EV("e")) && r.events == 1 && strcmp(buf_str(&text), "e") == 0,
               "run %zu: stops after the one event of the shape (%zu bytes, '%s')", i, k,
               buf_str(&text));
    }
    static const char s2[] = EV("0123456789") EV("0123456789");
    buf_reset(&text);
    r.room = 15;
    k = api_stream_sse_run(&g.st, s2, sizeof s2 - 1, 1 << 20, &r);
    TAP_OK(k == strlen(EV("0123456789")) && text.len == 10,
           "run: stops before the event that would pass the room (the caller cuts it)");
    r.room = 100;
    buf_reset(&text);
    k = api_stream_sse_run(&g.st, s2, sizeof s2 - 1, strlen(PRE "0123456789" POST), &r);
    TAP_INT(k, 0, "run: an event at the size limit is left to the parser (which refuses it)");
    got_free(&g);
    api_stream_init(&st);
    k = api_stream_sse_run(&st, s1, sizeof s1 - 1, 1 << 20, &r);
    TAP_INT(k, 0, "run: no shape yet, nothing consumed");
    api_stream_free(&st);
    buf_free(&text);
#undef EV
#undef PRE
#undef POST
}

/* Decode s[0..n) as the network thread does (net.c, net_feed_sse), in two pieces cut at cut:
 * whole events of the last chunk's shape by api_stream_sse_run, the rest by the parser up to
 * the end of the next event. *joined gets the events api_stream_sse_run joined. */
static unsigned long wide_total; /* events the AVX-512 loop decoded, all runs */

static void net_like_decode(struct got *g, const char *s, size_t n, size_t cut,
                            unsigned long *joined)
{
    got_init(g, api_stream_event);
    struct sse_parser p;
    sse_init(&p, 0);
    struct buf text = BUF_INIT;
    *joined = 0;
    int rc = 0;
    for (int piece = 0; piece < 2 && rc == 0; piece++) {
        const char *q = piece ? s + cut : s;
        size_t left = piece ? n - cut : cut;
        while (left && rc == 0) {
            if (sse_idle(&p) && g->st.shape_kind) {
                struct api_run r = {.text = &text, .room = (size_t)-1 / 2};
                buf_reset(&text);
                size_t k = api_stream_sse_run(&g->st, q, left, p.max_event, &r);
                got_emit(g, r.kind, text.data ? text.data : "", text.len);
                sse_skipped(&p, r.events);
                *joined += r.joined;
                wide_total += r.wide;
                q += k;
                left -= k;
                if (!left)
                    break;
            }
            size_t k = left;
            for (const char *e = q; (e = memchr(e, '\n', (size_t)(q + left - e))) &&
                                    e + 1 < q + left; e++)
                if (e[1] == '\n') {
                    k = (size_t)(e + 2 - q);
                    break;
                }
            rc = sse_feed(&p, q, k, got_on_event, g);
            q += k;
            left -= k;
        }
    }
    sse_free(&p);
    buf_free(&text);
}

/* A run of events of one shape: each event after the first has its end and the next event's
 * start checked in one compare (shape_gap) - all but the first (it sets the run going) and the
 * last (nothing after it); a stream of every kind of event, cut at every byte, decodes as the
 * parser alone decodes it. */
static void test_sse_run_joined(void)
{
#define PRE "{\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\""
#define POST "\"},\"finish_reason\":null}]}"
#define EV(text) "data: " PRE text POST "\n\n"
    struct buf s = BUF_INIT;
    buf_appends(&s, EV("first"));
    for (int i = 0; i < 1000; i++) /* short texts, some of 32 bytes or more, some escaped */
        buf_printf(&s, i % 100 == 50 ? EV("tok\\n%d ") : i % 10 == 5 ?
                   EV("a longer text of forty bytes or so %d ") : EV("tok%d "), i);
    struct got g, ref;
    unsigned long joined;
    got_decode(&ref, api_stream_event, s.data, s.len, s.len);
#if defined(__GNUC__) && defined(__x86_64__)
    int has512 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("bmi");
    /* base/cpu.h reads the loader's answers; the compiler's probe and cpuid are the oracle */
    unsigned ra, rb, rc, rd;
    int sha = __get_cpuid(1, &ra, &rb, &rc, &rd) && (rc & (1u << 19)) && (rc & (1u << 9)) &&
              __get_cpuid_count(7, 0, &ra, &rb, &rc, &rd) && (rb & (1u << 29));
    TAP_OK(cpu_avx2() == (__builtin_cpu_supports("avx2") != 0) &&
           cpu_avx512_scan() == (has512 && __builtin_cpu_supports("bmi2")) &&
           cpu_sha_ni() == sha,
           "cpu.h: AVX2 %d, AVX-512 scan %d, SHA-NI %d, as the CPU says", cpu_avx2(),
           cpu_avx512_scan(), cpu_sha_ni());
#else
    int has512 = 0;
#endif
    for (int simd = 2; simd >= 0; simd--) {
        api_stream_simd = simd;
        wide_total = 0;
        net_like_decode(&g, s.data, s.len, s.len, &joined);
        TAP_OK(g.content.len == ref.content.len &&
               memcmp(g.content.data, ref.content.data, ref.content.len) == 0,
               "joined: same text (simd %d)", simd);
        /* "first" (no shape yet) goes to the parser; of the 1,000 after it, tok0 starts the
         * run, tok999 has nothing after it, and the 10 escaped texts are decoded alone */
        TAP_OK(joined == 988, "joined: every other event in one compare (simd %d): %lu", simd,
               joined);
        /* with AVX-512BW the 64-byte loop takes the short plain texts (not the 100 long ones,
         * nor the event after each stop, which the other loops take) */
        if (simd == 2 && has512)
            TAP_OK(wide_total >= 700, "joined: %lu of them by the AVX-512 loop", wide_total);
        else
            TAP_OK(wide_total == 0, "joined: none by the AVX-512 loop (simd %d, AVX-512BW %d)",
                   simd, has512);
        got_free(&g);
    }
    api_stream_simd = 2;
    got_free(&ref);

    /* every kind of event next to the shaped ones, cut at every byte */
    buf_reset(&s);
    buf_appends(&s, EV("a") EV("b") EV("") EV("c\\n\\u00e9") EV("d") EV("e")
                "data:" PRE "f" POST "\n\n" "data:" PRE "g" POST "\n\n" EV("h")
                EV("i") ": keep-alive\n\n" EV("j") EV("k") "data: " PRE "l" POST "\r\n\r\n"
                EV("m") EV("n") "data: " PRE "o\"},\"finish_reason\":null,\"x\":1}]}\n\n" EV("p")
                EV("q") "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{"
                "\"reasoning_content\":\"r\"},\"finish_reason\":null}]}\n\n"
                "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{"
                "\"reasoning_content\":\"s\"},\"finish_reason\":null}]}\n\n" EV("t") EV("u")
                EV("v\\\"w") EV("x") "data: " PRE "y" POST "\n" "data: x\n\n" EV("z")
                EV("0") EV("1") "data: " PRE "2" POST "\n\n" "event: e\n" EV("3") EV("4")
                "data: " PRE "5" POST "\n\n" "data: [DONE]\n\n");
    int bad = 0;
    for (size_t cut = 0; cut < 3 * (s.len + 1); cut++) {
        /* every cut with AVX-512BW and AVX2 (where the CPU has them), with AVX2, without */
        api_stream_simd = 2 - (int)(cut / (s.len + 1));
        size_t c = cut % (s.len + 1);
        net_like_decode(&g, s.data, s.len, c, &joined);
        got_decode(&ref, api_stream_event, s.data, s.len, c);
        char *a = got_summary(&g), *b = got_summary(&ref);
        if (strcmp(a, b) != 0 && !bad++)
            printf("# cut %zu (simd %d):\n#  run    %s\n#  parser %s\n", c, api_stream_simd, a,
                   b);
        free(a);
        free(b);
        got_free(&g);
        got_free(&ref);
    }
    api_stream_simd = 2;
    TAP_INT(bad, 0, "joined: a stream of every kind of event, cut at every byte, as the parser");
    buf_free(&s);
#undef EV
#undef PRE
#undef POST
}

int main(void)
{
    struct got g;

    decode(&g, "openai_length.sse");
    TAP_STR(buf_str(&g.content), "{\"", "openai: content");
    TAP_STR(g.st.finish, "length", "openai: finish_reason length");
    TAP_INT(g.st.usage.prompt, 79, "openai: usage prompt from empty-choices chunk");
    TAP_INT(g.st.usage.completion, 1, "openai: usage completion");
    TAP_INT(g.st.usage.reasoning, 0, "openai: reasoning tokens");
    TAP_OK(g.st.done, "openai: [DONE] seen");
    TAP_STR(g.st.model, "gpt-4o-2024-08-06", "openai: model");
    got_free(&g);

    decode(&g, "azure_filter.sse");
    TAP_STR(buf_str(&g.content), "Hallo Welt!", "azure: content past prompt_filter_results");
    TAP_STR(g.st.finish, "stop", "azure: finish");
    TAP_STR(buf_str(&g.st.error), "", "azure: no error");
    got_free(&g);

    decode(&g, "deepseek_keepalive.sse");
    TAP_STR(buf_str(&g.content),
            "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x81\xE6\x9C\x89\xE4\xBB\x80\xE4\xB9\x88\xE5\x8F\xAF"
            "\xE4\xBB\xA5\xE5\xB8\xAE\xE4\xBD\xA0\xE7\x9A\x84\xE5\x90\x97\xEF\xBC\x9F\xF0\x9F\x98\x8A",
            "deepseek: CJK + emoji content, null never printed");
    TAP_STR(buf_str(&g.reasoning), "Okay, the user greets.", "deepseek: reasoning_content");
    TAP_OK(strstr(buf_str(&g.content), "null") == NULL, "deepseek: no literal null");
    got_free(&g);

    decode(&g, "llamacpp_reasoning.sse");
    TAP_STR(buf_str(&g.content), "OK", "llama.cpp: content after content:null");
    TAP_STR(buf_str(&g.reasoning), "Thinking Process", "llama.cpp: reasoning");
    TAP_INT(g.st.usage.completion, 191, "llama.cpp: usage with timings");
    TAP_INT(g.usages, 1, "llama.cpp: usage announced once");
    got_free(&g);

    decode(&g, "llamacpp_old_error.sse");
    TAP_INT(g.ret, 1, "old llama.cpp: error field ends the stream");
    TAP_OK(strstr(buf_str(&g.st.error), "exceeds the available context size") != NULL,
           "old llama.cpp: error message extracted");
    TAP_STR(g.st.error_code, "400", "old llama.cpp: numeric code");
    got_free(&g);

    decode(&g, "ollama_reasoning.sse");
    TAP_STR(buf_str(&g.content), "Hi there", "ollama: content");
    TAP_STR(buf_str(&g.reasoning), "Okay", "ollama: delta.reasoning");
    TAP_STR(g.st.finish, "length", "ollama: finish length");
    got_free(&g);

    decode(&g, "openrouter_midstream_error.sse");
    TAP_STR(buf_str(&g.content), "Partial ans", "openrouter: partial content kept");
    TAP_INT(g.ret, 1, "openrouter: mid-stream error ends the stream");
    TAP_STR(buf_str(&g.st.error), "Provider disconnected unexpectedly", "openrouter: message");
    TAP_STR(g.st.error_code, "server_error", "openrouter: code");
    got_free(&g);

    /* vLLM error shapes, sent as data events */
    chunk(&g, "{\"error\":{\"message\":\"The model `x` does not exist.\",\"type\":\"NotFoundError\","
              "\"code\":404}}");
    TAP_INT(g.ret, 1, "vllm: error object ends the stream");
    TAP_STR(buf_str(&g.st.error), "The model `x` does not exist.", "vllm: message");
    got_free(&g);
    chunk(&g, "{\"object\":\"error\",\"message\":\"maximum context length is 4096\","
              "\"type\":\"BadRequestError\",\"code\":400}");
    TAP_INT(g.ret, 1, "vllm (old): object=error ends the stream");
    TAP_STR(buf_str(&g.st.error), "maximum context length is 4096", "vllm (old): message");
    got_free(&g);

    /* Escapes, surrogate pairs, usage on the finish chunk, malformed JSON. */
    chunk(&g, "{\"choices\":[{\"delta\":{\"content\":\"a\\n\\\"b\\\" \\u00e9 \\ud83d\\ude00 \\ud800x\"},"
              "\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":7}}");
    TAP_STR(buf_str(&g.content), "a\n\"b\" \xC3\xA9 \xF0\x9F\x98\x80 \xEF\xBF\xBDx",
            "escapes and surrogate pairs decoded, lone surrogate replaced");
    TAP_INT(g.st.usage.total, 12, "usage on the finish chunk, total computed");
    TAP_INT(g.finishes, 1, "finish announced");
    got_free(&g);
    chunk(&g, "{\"choices\":[{\"delta\":{\"content\":\"x\"}}");
    TAP_INT(g.ret, -1, "truncated JSON is malformed");
    TAP_OK(strstr(buf_str(&g.st.error), "malformed") != NULL, "malformed JSON message");
    got_free(&g);
    chunk(&g, "[1,2]");
    TAP_INT(g.ret, -1, "non-object chunk is malformed");
    got_free(&g);
    {
        struct buf deep = BUF_INIT;
        buf_appends(&deep, "{\"x\":");
        for (int i = 0; i < 100000; i++)
            buf_appendc(&deep, '[');
        chunk(&g, buf_str(&deep));
        TAP_INT(g.ret, -1, "deeply nested JSON rejected without recursion blow-up");
        got_free(&g);
        buf_free(&deep);
    }
    chunk(&g, "{\"choices\":[{\"delta\":{\"content\":null,\"reasoning\":null}}]}");
    TAP_INT(g.content.len + g.reasoning.len, 0, "null content and reasoning emit nothing");
    got_free(&g);

    /* Non-streamed answer */
    memset(&g, 0, sizeof g);
    api_stream_init(&g.st);
    const char *comp = "{\"id\":\"c\",\"object\":\"chat.completion\",\"model\":\"m\",\"choices\":[{\"index\":0,"
                       "\"message\":{\"role\":\"assistant\",\"content\":\"whole answer\"},"
                       "\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":3,"
                       "\"completion_tokens\":2,\"total_tokens\":5}}";
    TAP_INT(api_decode_completion(&g.st, comp, strlen(comp), got_emit, &g), 0, "completion decoded");
    TAP_STR(buf_str(&g.content), "whole answer", "completion content");
    TAP_STR(g.st.finish, "stop", "completion finish");
    got_free(&g);

    /* A non-streamed 200 with nothing in it is no answer: no text, finish stays "" (the
     * transport then says "the server sent no answer", exit 4), never "stop". */
    static const char *const empties[] = {
        "{}", "{\"choices\":[]}",
        "{\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"\"}}]}",
        "{\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":null}}]}",
    };
    for (size_t i = 0; i < sizeof empties / sizeof *empties; i++) {
        memset(&g, 0, sizeof g);
        api_stream_init(&g.st);
        int rc = api_decode_completion(&g.st, empties[i], strlen(empties[i]), got_emit, &g);
        TAP_OK(rc == 0 && g.content.len == 0 && g.st.finish[0] == '\0',
               "empty completion %s: no text and no finish", empties[i]);
        got_free(&g);
    }
    /* Text without a finish_reason is still a complete whole answer. */
    memset(&g, 0, sizeof g);
    api_stream_init(&g.st);
    comp = "{\"choices\":[{\"message\":{\"content\":\"x\"}}]}";
    TAP_OK(api_decode_completion(&g.st, comp, strlen(comp), got_emit, &g) == 0 &&
           strcmp(g.st.finish, "stop") == 0, "completion with text and no finish: stop");
    got_free(&g);

    /* Usage counts of the wrong type or range are ignored (and flagged), never fatal; the
     * good counts of the same object are kept. */
    static const struct {
        const char *usage;
        int ok;                     /* usage.present */
        long long p, c, t;
    } usages[] = {
        {"{\"prompt_tokens\":1,\"completion_tokens\":2,\"total_tokens\":\"8\"}", 1, 1, 2, 3},
        {"{\"prompt_tokens\":null,\"completion_tokens\":-5,\"total_tokens\":1e300}", 0, 0, 0, 0},
        {"{\"prompt_tokens\":\"x\",\"completion_tokens\":{},\"total_tokens\":[1]}", 0, 0, 0, 0},
        {"{\"prompt_tokens\":4,\"completion_tokens\":2.5,\"total_tokens\":99999999999999999999}",
         1, 4, 0, 4},
        {"{\"prompt_tokens\":7,\"completion_tokens\":true,\"total_tokens\":9,"
         "\"completion_tokens_details\":{\"reasoning_tokens\":\"3\"}}", 1, 7, 0, 9},
    };
    for (size_t i = 0; i < sizeof usages / sizeof *usages; i++) {
        char json[512];
        snprintf(json, sizeof json, "{\"choices\":[],\"usage\":%s}", usages[i].usage);
        chunk(&g, json);
        TAP_OK(g.ret == 0 && g.st.error.len == 0, "usage %s: not an error", usages[i].usage);
        TAP_INT(g.st.usage_bad, 1, "usage of the wrong type is flagged");
        TAP_OK(g.st.usage.present == usages[i].ok && g.st.usage.prompt == usages[i].p &&
               g.st.usage.completion == usages[i].c && g.st.usage.total == usages[i].t,
               "usage %s: the good counts kept (%lld %lld %lld)", usages[i].usage,
               g.st.usage.prompt, g.st.usage.completion, g.st.usage.total);
        got_free(&g);
    }
    chunk(&g, "{\"choices\":[],\"usage\":{\"prompt_tokens\":9007199254740992,\"total_tokens\":0}}");
    TAP_OK(g.ret == 0 && !g.st.usage_bad && g.st.usage.prompt == 9007199254740992LL,
           "usage up to 2^53 is read");
    got_free(&g);

    /* HTTP error bodies */
    error_msg(401, "application/json",
              "{\"error\":{\"message\":\"Incorrect API key provided.\",\"type\":\"invalid_request_error\","
              "\"code\":\"invalid_api_key\"}}",
              "HTTP 401: Incorrect API key provided. (invalid_api_key)", "invalid_api_key",
              "openai 401");
    error_msg(429, "application/json",
              "{\"error\":{\"message\":\"You exceeded your current quota.\",\"type\":\"insufficient_quota\","
              "\"code\":\"insufficient_quota\"}}",
              "HTTP 429: You exceeded your current quota. (insufficient_quota)", "insufficient_quota",
              "openai 429 insufficient_quota");
    error_msg(400, "application/json", "{\"object\":\"error\",\"message\":\"bad\",\"code\":400}",
              "HTTP 400: bad (400)", NULL, "vllm old shape");
    error_msg(422, "application/json", "{\"detail\":\"Field required\"}",
              "HTTP 422: Field required", NULL, "detail string");
    error_msg(500, "application/json", "{\"error\":\"upstream failed\"}",
              "HTTP 500: upstream failed", NULL, "error as string");
    error_msg(502, "text/html",
              "<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>",
              "HTTP 502: an HTML page (\"502 Bad Gateway\") - probably from a proxy or gateway, "
              "not the API",
              NULL, "HTML page from a proxy");
    error_msg(503, "text/plain", "Service Unavailable\n", "HTTP 503: Service Unavailable", NULL,
              "plain text body");
    error_msg(404, NULL, "", "HTTP 404", NULL, "empty body");

    /* Request JSON */
    struct api_message msgs[] = {API_MSG("system", "be brief"), API_MSG("user", "hi \"there\"\n")};
    struct api_request rq = {.model = "gpt-4o", .messages = msgs, .n_messages = 2, .max_tokens = 50,
                             .stream = 1, .include_usage = 1, .temperature = 0.5,
                             .has_temperature = 1};
    char *body = api_request_json(&rq);
    cJSON *o = cJSON_Parse(body);
    TAP_OK(o != NULL, "request is valid JSON");
    TAP_STR(cJSON_GetObjectItem(o, "model")->valuestring, "gpt-4o", "request model");
    TAP_INT(cJSON_GetArraySize(cJSON_GetObjectItem(o, "messages")), 2, "request messages");
    TAP_STR(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(o, "messages"), 1),
                                "content")->valuestring, "hi \"there\"\n", "content round-trips");
    TAP_OK(cJSON_IsTrue(cJSON_GetObjectItem(o, "stream")), "stream: true");
    TAP_OK(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "stream_options"),
                                            "include_usage")), "stream_options.include_usage");
    TAP_INT(cJSON_GetObjectItem(o, "max_tokens")->valueint, 50, "max_tokens");
    cJSON_Delete(o);
    free(body);
    rq.include_usage = 0;
    rq.max_tokens = 0;
    rq.has_temperature = 0;
    body = api_request_json(&rq);
    TAP_OK(strstr(body, "stream_options") == NULL, "include_usage off: no stream_options");
    TAP_OK(strstr(body, "max_tokens") == NULL && strstr(body, "temperature") == NULL,
           "unset options are not sent");
    free(body);

    /* every byte from 1 to 255 at every offset of a 16-byte block, in long runs: escaped
     * byte for byte as cJSON prints the same string (the body and the cache key as before) */
    {
        char text[600];
        int same = 1;
        for (int off = 0; off < 16 && same; off++) {
            size_t n = 0;
            for (int k = 0; k < off; k++)
                text[n++] = 'a';
            for (int c = 1; c < 256; c++) {
                text[n++] = (char)c;
                text[n++] = c % 3 ? 'x' : (char)(c ^ 0x40);
            }
            for (int k = 0; k < 37; k++)
                text[n++] = (char)('a' + k % 26);
            text[n] = '\0';
            struct api_message one[] = {API_MSG("user", text)};
            struct api_request r1 = {.model = "m", .messages = one, .n_messages = 1};
            char *got = api_request_json(&r1);
            cJSON *want = cJSON_CreateString(text);
            char *w = cJSON_PrintUnformatted(want);
            same = got && w && strstr(got, w) != NULL;
            free(w);
            cJSON_Delete(want);
            free(got);
        }
        TAP_OK(same, "a string's escapes are cJSON's, byte for byte, at every alignment");
    }

    test_shapes();
    test_sse_run();
    test_sse_run_joined();
    TAP_INT(api_outcome_exit(API_OK), 0, "exit 0 for complete");
    TAP_INT(api_outcome_exit(API_ERR_TRUNCATED), 5, "exit 5 for truncated");
    TAP_INT(api_outcome_exit(API_LIMIT), 8, "exit 8 for tokterm's own limits");
    TAP_STR(api_outcome_name(API_LIMIT), "limit", "API_LIMIT is \"limit\"");
    return tap_done();
}
