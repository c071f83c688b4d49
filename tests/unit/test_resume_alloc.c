/* test_resume_alloc.c - what reading a conversation back costs the allocator (issue 14: the
 * resume, `-c -p` over thousands of rows). The backward walk (store_conversation_walk) and the
 * turns built from its rows (conv_from_rows) allocate a row's text and an answer's model, and
 * nothing else per row: its role is one of four static strings, a user row's model is not
 * read, and a turn takes the model of its answer instead of copying it.
 *
 * And the walk reads no clock per row (store_step reads it only once SQLite says busy).
 *
 * And the request's cache key is hashed from the body where it is (request_cache_key): the
 * body of a resume, hundreds of kB, was first copied after the key's head into a new buffer
 * (fresh pages the kernel faults in, one a 4 KiB page).
 *
 * malloc, calloc and realloc are counted by alloccount.h, as in test_render_alloc.c; the ASan
 * build leaves this test out. */
#include "config.h"
#include "tap.h"
#include "alloccount.h"
#include "core/conf.h"
#include "core/conv.h"
#include "core/request.h"
#include "store/store.h"
#include "base/xmalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* The monotonic clock's reads, counted (util_now reads it; the store's steps used to read it
 * twice a row). The time itself comes from the kernel. */
static long n_clock;

int clock_gettime(clockid_t id, struct timespec *ts)
{
    if (id == CLOCK_MONOTONIC)
        n_clock++;
    return (int)syscall(SYS_clock_gettime, id, ts);
}

/* Never enough: the walk reads every row. */
static int walk_all(void *ud, const struct store_message *m, long tokens, int live)
{
    (void)m;
    (void)tokens;
    (void)live;
    ++*(long *)ud;
    return 0;
}

#define TURNS 400

/* The cache key of a 1 MB body: no allocation, and the key of the canonical text as before
 * (openai: "tokterm-cache-v1\nURL\nBODY"; another dialect: its name before the URL). */
static void test_cache_key(void)
{
    size_t n = 1 << 20;
    char *body = xmalloc(n + 1);
    for (size_t i = 0; i < n; i++)
        body[i] = "{\"messages\":[]} abc"[i % 19];
    body[n] = '\0';
    struct conf c;
    conf_defaults(&c);
    unsigned char key[32], want[32];
    n_alloc = 0;
    request_cache_key(&c, NULL, body, key);
    long allocs = n_alloc;
    TAP_OK(allocs == 0, "the cache key of a 1 MB body: %ld allocations (the body not copied)",
           allocs);
    char *canon = xasprintf("tokterm-cache-v1\n%s\n%s", c.base_url, body);
    store_cache_key(canon, strlen(canon), want);
    TAP_OK(memcmp(key, want, 32) == 0, "the key of the canonical text, as before");
    free(canon);
    struct buf err = BUF_INIT;
    conf_set(&c, "api", "anthropic", &err);
    buf_free(&err);
    request_cache_key(&c, NULL, body, key);
    canon = xasprintf("tokterm-cache-v1\nanthropic %s\n%s", c.base_url, body);
    store_cache_key(canon, strlen(canon), want);
    TAP_OK(memcmp(key, want, 32) == 0, "another dialect: its name before the URL, as before");
    free(canon);
    conf_free(&c);
    free(body);
}

int main(void)
{
    test_cache_key();
    char dir[] = "/tmp/tt-resume-alloc-XXXXXX";
    if (!mkdtemp(dir)) {
        printf("Bail out! mkdtemp\n");
        return 1;
    }
    char *path = xasprintf("%s/db", dir), *err = NULL;
    struct store *st = store_open(path, NULL, &err);
    if (!st) {
        printf("Bail out! cannot open %s: %s\n", path, err);
        return 1;
    }
    int64_t conv = store_conversation_new(st, NULL, NULL, "m", NULL), parent = 0;
    for (int i = 0; i < TURNS; i++) {
        char text[64];
        snprintf(text, sizeof text, "question %d about the parser", i);
        struct store_msg_info ui = {.model = "gpt-4o-mini", .parent_id = parent};
        int64_t u = store_message_add(st, conv, "user", text, strlen(text), &ui);
        snprintf(text, sizeof text, "answer %d: the buffer", i);
        struct store_msg_info ai = {.model = "gpt-4o-mini", .parent_id = u};
        store_message_add(st, conv, "assistant", text, strlen(text), &ai);
        parent = u;
    }

    long seen = 0;
    struct store_walk w;
    /* a first walk prepares the statements (SQLite's allocations, once a process) */
    if (store_conversation_walk(st, conv, "o200k_base", walk_all, &seen, &w) == 0)
        store_walk_free(&w);
    seen = 0;
    n_alloc = 0;
    n_clock = 0;
    int rc = store_conversation_walk(st, conv, "o200k_base", walk_all, &seen, &w);
    long walk_allocs = n_alloc, walk_clock = n_clock;
    TAP_INT(rc, 0, "the walk reads the conversation");
    TAP_INT(seen, 2 * TURNS, "every row is read");
    TAP_OK(rc == 0 && w.complete, "to its first row");
    /* per row: its text, and an answer's model (2 allocations a turn); the rest is the
     * growing arrays and the statements (a few dozen in all) */
    TAP_OK(walk_allocs <= 3 * TURNS + 64,
           "the walk: %ld allocations for %d rows (at most a text a row and a model an answer)",
           walk_allocs, 2 * TURNS);
    TAP_OK(walk_clock <= 8, "the walk: %ld clock reads for %d rows (none a row)", walk_clock,
           2 * TURNS);
    if (rc == 0) {
        TAP_STR(w.conv->messages[0].role, "user", "the oldest row: the first question");
        TAP_OK(w.conv->messages[0].model == NULL, "a user row's model is not read");
        TAP_STR(w.conv->messages[1].model, "gpt-4o-mini", "an answer's model is");
        struct conv c;
        conv_init(&c);
        n_alloc = 0;
        conv_from_rows(&c, w.conv, NULL);
        long build_allocs = n_alloc;
        TAP_INT((long)c.n, TURNS, "the turns");
        TAP_OK(c.n == TURNS && c.turns[TURNS - 1].model &&
                   strcmp(c.turns[TURNS - 1].model, "gpt-4o-mini") == 0,
               "a turn has its answer's model");
        TAP_OK(c.n == TURNS && strcmp(c.turns[7].prompt, "question 7 about the parser") == 0 &&
                   strcmp(c.turns[7].answer, "answer 7: the buffer") == 0,
               "and its texts");
        /* the turns take the rows' texts and models: what is left is the arrays */
        TAP_OK(build_allocs <= 64, "the turns from the rows: %ld allocations for %d turns",
               build_allocs, TURNS);
        conv_free(&c);
        store_walk_free(&w);
    }
    store_close(st);
    char *wal = xasprintf("%s-wal", path), *shm = xasprintf("%s-shm", path);
    unlink(path);
    unlink(wal);
    unlink(shm);
    rmdir(dir);
    free(wal);
    free(shm);
    free(path);
    return tap_done();
}
