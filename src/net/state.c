/* state.c - quota state shared in Redis (see state.h). */
#include "config.h"
#include "net/state.h"

#include "base/sha256.h"
#include "base/util.h"
#include "base/xmalloc.h"
#include "net/redis_dl.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/time.h>
#include <unistd.h>

/* Seconds between two attempts to reach a Redis that was lost. */
#define STATE_RETRY_S 1.0
/* How long Redis keeps a quota nobody used (its learnt sizes), in milliseconds. */
#define STATE_TTL_MS "3600000"
/* How long one process may probe unknown limits before another may (it may have died). */
#define STATE_PROBE_MS "2000"
/* A process that has not asked for this long no longer counts as sharing a quota. */
#define STATE_PEER_S "10"
/* Words of the longest command: EVALSHA sha numkeys, 2 keys, 10 arguments. */
#define STATE_ARGV_MAX 16
/* The largest reply kept: ours are a SHA-1 or a few numbers (state_reply). */
#define STATE_REPLY_MAX (64 * 1024)
#define STATE_REPLY_MAX_TEXT "64 KiB"

/* ---------------------------------------------------------------- scripts */

/* The clock of every script: Redis's, in seconds. */
#define LUA_NOW                                                                                  \
    "if redis.replicate_commands then pcall(redis.replicate_commands) end\n"                      \
    "local tm = redis.call('TIME')\n"                                                             \
    "local now = tonumber(tm[1]) + tonumber(tm[2]) / 1000000\n"

/* A dimension's level now: its stored level refilled since, never above its size. */
#define LUA_LEVEL                                                                                \
    "local function level(h, cap, rate, fallback)\n"                                              \
    "  if h[3] and h[4] then\n"                                                                   \
    "    return math.min(cap, tonumber(h[3]) + (now - tonumber(h[4])) * rate)\n"                  \
    "  end\n"                                                                                     \
    "  if fallback >= 0 then return math.min(cap, fallback) end\n"                                \
    "  return cap\n"                                                                              \
    "end\n"

/* KEYS[1] the quota, KEYS[2] the endpoint; ARGV: per dimension (r, t) cap rate cost level,
 * then max_book, then 1 when the endpoint answered without any rate-limit header, then this
 * process's name. Returns {verdict, seconds as a string, processes that asked in the last
 * STATE_PEER_S seconds}. While no process knows the limits, one process probes (the
 * local slow start: one request) and the others ask again every 10 ms; an endpoint known to
 * send no limits leaves every process to its local state. */
static const char lua_admit[] =
    LUA_NOW LUA_LEVEL
    "local pk = KEYS[1] .. ':p'\n"
    "redis.call('ZADD', pk, now, ARGV[11])\n"
    "redis.call('ZREMRANGEBYSCORE', pk, '-inf', now - " STATE_PEER_S ")\n"
    "redis.call('PEXPIRE', pk, " STATE_TTL_MS ")\n"
    "local peers = redis.call('ZCARD', pk)\n"
    "local ou = tonumber(redis.call('HGET', KEYS[2], 'open_until') or '0')\n"
    "if ou > now then return {2, tostring(ou - now), peers} end\n"
    "local cu = tonumber(redis.call('HGET', KEYS[1], 'cool_until') or '0')\n"
    "if cu > now then return {3, tostring(cu - now), peers} end\n"
    "local wait, known, upd = 0, false, {}\n"
    "for i, d in ipairs({'r', 't'}) do\n"
    "  local b = (i - 1) * 4\n"
    "  local cap, rate = tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2])\n"
    "  local cost, lvl = tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4])\n"
    "  local h = redis.call('HMGET', KEYS[1], d .. 'cap', d .. 'rate', d .. 'lvl', d .. 't')\n"
    "  if cap <= 0 or rate <= 0 then cap, rate = tonumber(h[1] or '0'), tonumber(h[2] or '0') end\n"
    "  if cap > 0 and rate > 0 then\n"
    "    known = true\n"
    "    local l = level(h, cap, rate, lvl)\n"
    "    if cost > cap then cost = cap end\n"
    "    if l < cost and (cost - l) / rate > wait then wait = (cost - l) / rate end\n"
    "    upd[#upd + 1] = {d, cap, rate, l - cost}\n"
    "  end\n"
    "end\n"
    "if not known then\n"
    "  if ARGV[10] == '1' or redis.call('HEXISTS', KEYS[1], 'nolimit') == 1 then\n"
    "    redis.call('HSET', KEYS[1], 'nolimit', 1)\n"
    "    redis.call('PEXPIRE', KEYS[1], " STATE_TTL_MS ")\n"
    "    return {-1, '0', peers}\n"
    "  end\n"
    "  if redis.call('SET', KEYS[1] .. ':probe', 1, 'NX', 'PX', " STATE_PROBE_MS ") then\n"
    "    return {-1, '0', peers}\n"
    "  end\n"
    "  return {1, '0.01', peers}\n"
    "end\n"
    "if wait > tonumber(ARGV[9]) then return {1, tostring(wait), peers} end\n"
    "for _, u in ipairs(upd) do\n"
    "  redis.call('HSET', KEYS[1], u[1] .. 'cap', u[2], u[1] .. 'rate', u[3], u[1] .. 'lvl',\n"
    "             u[4], u[1] .. 't', now)\n"
    "end\n"
    "redis.call('PEXPIRE', KEYS[1], " STATE_TTL_MS ")\n"
    "return {0, tostring(wait), peers}\n";

/* KEYS[1] the quota; ARGV: the levels the server reported (r, t; < 0 unknown), each
 * dimension's cap and rate as this process knows them (0: unknown), then 1 when the answer
 * carried no rate-limit header at all. Levels only come down; a bucket Redis does not know yet
 * is set up from the caps and rates; the probe is over (the next process need not wait out its
 * 2 s: until 2026-12 a one-shot probe taught Redis nothing, so every next run waited). */
static const char lua_report[] =
    LUA_NOW LUA_LEVEL
    "for i, d in ipairs({'r', 't'}) do\n"
    "  local lvl = tonumber(ARGV[i])\n"
    "  local cap, rate = tonumber(ARGV[1 + 2 * i]), tonumber(ARGV[2 + 2 * i])\n"
    "  local h = redis.call('HMGET', KEYS[1], d .. 'cap', d .. 'rate', d .. 'lvl', d .. 't')\n"
    "  if (not h[1] or not h[2]) and cap > 0 and rate > 0 then\n"
    "    if lvl < 0 then lvl = math.max(cap - 1, 0) elseif lvl > cap then lvl = cap end\n"
    "    redis.call('HSET', KEYS[1], d .. 'cap', cap, d .. 'rate', rate, d .. 'lvl', lvl,\n"
    "               d .. 't', now)\n"
    "  elseif lvl >= 0 and h[1] and h[2] then\n"
    "    local l = level(h, tonumber(h[1]), tonumber(h[2]), -1)\n"
    "    if lvl < l then redis.call('HSET', KEYS[1], d .. 'lvl', lvl, d .. 't', now) end\n"
    "  end\n"
    "end\n"
    "if ARGV[7] == '1' then redis.call('HSET', KEYS[1], 'nolimit', 1) end\n"
    "redis.call('DEL', KEYS[1] .. ':probe')\n"
    "redis.call('PEXPIRE', KEYS[1], " STATE_TTL_MS ")\n"
    "return 0\n";

/* KEYS[1] the quota; ARGV[1] the cool-down in seconds (0: none). Empties both buckets. */
static const char lua_cool[] =
    LUA_NOW LUA_LEVEL
    "for _, d in ipairs({'r', 't'}) do\n"
    "  local h = redis.call('HMGET', KEYS[1], d .. 'cap', d .. 'rate', d .. 'lvl', d .. 't')\n"
    "  if h[1] and h[2] then\n"
    "    local l = level(h, tonumber(h[1]), tonumber(h[2]), -1)\n"
    "    if l > 0 then redis.call('HSET', KEYS[1], d .. 'lvl', 0, d .. 't', now) end\n"
    "  end\n"
    "end\n"
    "local c = tonumber(ARGV[1])\n"
    "if c > 0 then\n"
    "  local cu = tonumber(redis.call('HGET', KEYS[1], 'cool_until') or '0')\n"
    "  if now + c > cu then redis.call('HSET', KEYS[1], 'cool_until', now + c) end\n"
    "end\n"
    "redis.call('PEXPIRE', KEYS[1], " STATE_TTL_MS ")\n"
    "return 0\n";

/* KEYS[1] the endpoint; ARGV: success (1/0), threshold, cooldown. */
static const char lua_breaker[] =
    LUA_NOW
    "if ARGV[1] == '1' then\n"
    "  if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('DEL', KEYS[1]) end\n"
    "  return 0\n"
    "end\n"
    "local f = redis.call('HINCRBY', KEYS[1], 'failures', 1)\n"
    "if f >= tonumber(ARGV[2]) then\n"
    "  redis.call('HSET', KEYS[1], 'open_until', now + tonumber(ARGV[3]), 'failures', 0)\n"
    "end\n"
    "redis.call('PEXPIRE', KEYS[1], " STATE_TTL_MS ")\n"
    "return 0\n";

enum { LUA_ADMIT, LUA_REPORT, LUA_COOL, LUA_BREAKER, LUA_N };
static const char *const lua_src[LUA_N] = {lua_admit, lua_report, lua_cool, lua_breaker};

struct state {
    struct state_addr addr;
    char *label;              /* the URL without its password, for messages */
    redisContext *c;          /* NULL while not connected */
    double next_try;          /* monotonic time of the next connection attempt */
    int lost;                 /* the connection was lost (a warning was given) */
    char sha[LUA_N][41];      /* each script's SHA-1 (SCRIPT LOAD on connecting) */
    char who[24];             /* this process's name among the peers of a quota */
    int peers;                /* processes sharing the last quota asked about (0: unknown) */
    int pending;              /* updates sent whose replies are not read yet */
    char warning[512];        /* to hand out (state_take_warning), or "" */
    char shown[512];          /* the last one handed out */
    unsigned long calls, fallbacks;
};

/* ---------------------------------------------------------------- connection */

struct state *state_new(const char *url, const char *password, char *err, size_t size)
{
    struct state *st = xcalloc(1, sizeof *st);
    if (state_parse_url(url, &st->addr, err, size) != 0) {
        free(st);
        return NULL;
    }
    if (password && *password)
        snprintf(st->addr.password, sizeof st->addr.password, "%s", password);
    snprintf(st->who, sizeof st->who, "%ld.%lx", (long)getpid(),
             (unsigned long)(util_now() * 1e6) ^ (unsigned long)(uintptr_t)st);
    const char *missing;
    (void)redis_dl_load(&missing); /* now, not inside the first call's budget (state_connect
                                      says what is missing) */
    if (st->addr.path[0])
        st->label = xasprintf("unix://%s", st->addr.path);
    else
        st->label = xasprintf("redis://%s:%d/%d", st->addr.host, st->addr.port, st->addr.db);
    return st;
}

void state_free(struct state *st)
{
    if (!st)
        return;
    if (st->c)
        redisFree(st->c);
    util_wipe(&st->addr, sizeof st->addr);
    free(st->label);
    free(st);
}

/* The connection is unusable: drop it, say so once, try again in STATE_RETRY_S. */
static void state_lose(struct state *st, const char *reason)
{
    char why[200]; /* reason may live in the context freed below */
    snprintf(why, sizeof why, "%s", reason && *reason ? reason : "no answer");
    for (char *p = why; *p; p++) /* a server's error text: printable ASCII only */
        if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
            *p = '?';
    if (st->c) {
        redisFree(st->c);
        st->c = NULL;
    }
    st->pending = 0;
    st->next_try = util_now() + STATE_RETRY_S;
    if (!st->lost) {
        st->lost = 1;
        snprintf(st->warning, sizeof st->warning, "shared state %s unreachable (%s): pacing "
                 "with the local state; trying again in the background", st->label, why);
    }
}

/* One reply, read within the budget and at most STATE_REPLY_MAX bytes: NULL with the
 * connection lost past either. hiredis's own blocking read bounds each read() only (its
 * timeout), and keeps whatever a reply announces: a server trickling a byte every 40 ms held a
 * request for as long as it liked, and one announcing a 2 GB string was buffered whole (3.9
 * GB resident, 20 s, until 2026-12). Our replies are a SHA-1 or a few numbers. */
static redisReply *state_reply(struct state *st)
{
    double until = util_now() + st->addr.budget_ms / 1000.0;
    for (;;) {
        void *p = NULL;
        if (redisReaderGetReply(st->c->reader, &p) != REDIS_OK) {
            state_lose(st, st->c->reader->errstr);
            return NULL;
        }
        if (p)
            return p;
        if (st->c->reader->len - st->c->reader->pos > STATE_REPLY_MAX) {
            state_lose(st, "a reply larger than " STATE_REPLY_MAX_TEXT);
            return NULL;
        }
        double left = until - util_now();
        struct pollfd pf = {st->c->fd, POLLIN, 0};
        int k = left > 0 ? poll(&pf, 1, (int)(left * 1000) + 1) : 0;
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            char why[64];
            snprintf(why, sizeof why, "slower than %d ms", st->addr.budget_ms);
            state_lose(st, why);
            return NULL;
        }
        if (redisBufferRead(st->c) != REDIS_OK) {
            state_lose(st, st->c->errstr[0] ? st->c->errstr : "no answer");
            return NULL;
        }
    }
}

static redisReply *state_cmd(struct state *st, int argc, const char **argv, const size_t *lens)
{
    int done = 0;
    if (redisAppendCommandArgv(st->c, argc, argv, lens) != REDIS_OK) {
        state_lose(st, st->c->errstr[0] ? st->c->errstr : "no answer");
        return NULL;
    }
    while (!done)
        if (redisBufferWrite(st->c, &done) != REDIS_OK) {
            state_lose(st, st->c->errstr[0] ? st->c->errstr : "no answer");
            return NULL;
        }
    return state_reply(st);
}

/* A command whose reply only says yes or no: 0, or -1 (connection dropped, why). */
static int state_simple(struct state *st, int argc, const char **argv, const size_t *lens,
                        const char *why)
{
    redisReply *r = state_cmd(st, argc, argv, lens);
    if (!r)
        return -1;
    int bad = r->type == REDIS_REPLY_ERROR;
    freeReplyObject(r);
    if (bad)
        state_lose(st, why);
    return bad ? -1 : 0;
}

/* SCRIPT LOAD each script: its SHA-1 for EVALSHA. 0, or -1 with the connection lost. */
static int state_load_scripts(struct state *st)
{
    for (int i = 0; i < LUA_N; i++) {
        const char *av[3] = {"SCRIPT", "LOAD", lua_src[i]};
        size_t al[3] = {6, 4, strlen(lua_src[i])};
        redisReply *r = state_cmd(st, 3, av, al);
        if (!r)
            return -1;
        int ok = r->type == REDIS_REPLY_STRING && r->len == 40;
        if (ok)
            memcpy(st->sha[i], r->str, 41);
        freeReplyObject(r);
        if (!ok) {
            state_lose(st, "SCRIPT LOAD refused");
            return -1;
        }
    }
    return 0;
}

/* Connect when not connected and the time has come: 0 when connected. */
static int state_connect(struct state *st)
{
    if (st->c)
        return 0;
    if (util_now() < st->next_try)
        return -1;
    const char *missing;
    if (redis_dl_load(&missing) != 0) {
        state_lose(st, missing);
        return -1;
    }
    int ms = st->addr.budget_ms;
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    st->c = st->addr.path[0] ? redisConnectUnixWithTimeout(st->addr.path, tv)
                             : redisConnectWithTimeout(st->addr.host, st->addr.port, tv);
    if (!st->c || st->c->err) {
        char why[160];
        snprintf(why, sizeof why, "%s", st->c ? st->c->errstr : "out of memory");
        state_lose(st, why);
        return -1;
    }
    if (redisSetTimeout(st->c, tv) != REDIS_OK) {
        state_lose(st, "cannot set its timeout");
        return -1;
    }
    if (st->addr.password[0]) { /* AUTH [user] password */
        const char *av[3] = {"AUTH", st->addr.user, st->addr.password};
        size_t al[3] = {4, strlen(st->addr.user), strlen(st->addr.password)};
        int n = 3;
        if (!st->addr.user[0]) {
            av[1] = av[2];
            al[1] = al[2];
            n = 2;
        }
        if (state_simple(st, n, av, al, "AUTH refused: check the password") != 0)
            return -1;
    }
    if (st->addr.db) {
        char db[16];
        snprintf(db, sizeof db, "%d", st->addr.db);
        const char *av[2] = {"SELECT", db};
        size_t al[2] = {6, strlen(db)};
        if (state_simple(st, 2, av, al, "SELECT refused") != 0)
            return -1;
    }
    if (state_load_scripts(st) != 0)
        return -1;
    if (st->lost)
        snprintf(st->warning, sizeof st->warning, "shared state %s reachable again: pacing "
                 "with it", st->label);
    st->lost = 0;
    return 0;
}

/* The command that runs script i (EVALSHA, or EVAL with its text) into av/al; returns argc. */
static int state_argv(struct state *st, int i, int eval, int nkeys, const char **keys,
                      int nargs, const char **args, char nk[8], const char **av, size_t *al)
{
    snprintf(nk, 8, "%d", nkeys);
    int n = 0;
    av[n++] = eval ? "EVAL" : "EVALSHA";
    av[n++] = eval ? lua_src[i] : st->sha[i];
    av[n++] = nk;
    for (int k = 0; k < nkeys; k++)
        av[n++] = keys[k];
    for (int k = 0; k < nargs && n < STATE_ARGV_MAX; k++)
        av[n++] = args[k];
    for (int k = 0; k < n; k++)
        al[k] = strlen(av[k]);
    return n;
}

/* Read the replies of the updates sent without waiting (state_send). A script cache flushed
 * meanwhile (NOSCRIPT) loses that one update, and the scripts are loaded again. 0, or -1 with
 * the connection lost. */
static int state_drain(struct state *st)
{
    int reload = 0;
    while (st->c && st->pending > 0) {
        redisReply *r = state_reply(st);
        if (!r)
            return -1;
        reload |= r->type == REDIS_REPLY_ERROR && util_starts_with(r->str, "NOSCRIPT");
        freeReplyObject(r);
        st->pending--;
    }
    return reload ? state_load_scripts(st) : 0;
}

/* Run script i with keys and args: the reply (caller frees), or NULL (the local state answers).
 * The updates sent before are read first; all of it within the budget. */
static redisReply *state_eval(struct state *st, int i, int nkeys, const char **keys, int nargs,
                              const char **args)
{
    st->calls++;
    double t0 = util_now();
    if (state_connect(st) != 0 || state_drain(st) != 0) {
        st->fallbacks++;
        return NULL;
    }
    const char *av[STATE_ARGV_MAX];
    size_t al[STATE_ARGV_MAX];
    char nk[8];
    int n = state_argv(st, i, 0, nkeys, keys, nargs, args, nk, av, al);
    redisReply *r = state_cmd(st, n, av, al);
    if (r && r->type == REDIS_REPLY_ERROR && util_starts_with(r->str, "NOSCRIPT")) {
        freeReplyObject(r); /* its script cache was flushed, or it restarted: send the text */
        n = state_argv(st, i, 1, nkeys, keys, nargs, args, nk, av, al);
        r = state_cmd(st, n, av, al);
    }
    if (r && r->type == REDIS_REPLY_ERROR) {
        char why[200];
        snprintf(why, sizeof why, "%.150s", r->str);
        freeReplyObject(r);
        state_lose(st, why);
        r = NULL;
    }
    if (r && util_now() - t0 > st->addr.budget_ms / 1000.0) {
        freeReplyObject(r); /* slow: the answer came, but the budget is over */
        char why[64];
        snprintf(why, sizeof why, "slower than %d ms", st->addr.budget_ms);
        state_lose(st, why);
        r = NULL;
    }
    if (!r)
        st->fallbacks++;
    return r;
}

/* Send an update (script i) without waiting for its reply: the next state_eval or
 * state_flush reads it. Nothing happens while Redis is lost. */
static void state_send(struct state *st, int i, int nkeys, const char **keys, int nargs,
                       const char **args)
{
    st->calls++;
    if (state_connect(st) != 0) {
        st->fallbacks++;
        return;
    }
    const char *av[STATE_ARGV_MAX];
    size_t al[STATE_ARGV_MAX];
    char nk[8];
    int n = state_argv(st, i, 0, nkeys, keys, nargs, args, nk, av, al);
    int done = 0;
    if (redisAppendCommandArgv(st->c, n, av, al) != REDIS_OK) {
        state_lose(st, st->c->errstr);
        st->fallbacks++;
        return;
    }
    st->pending++;
    while (!done)
        if (redisBufferWrite(st->c, &done) != REDIS_OK) {
            state_lose(st, st->c->errstr);
            st->fallbacks++;
            return;
        }
}

void state_flush(struct state *st)
{
    if (st && st->c && state_drain(st) != 0)
        st->fallbacks++;
}

static void state_fmt(char *buf, double v)
{
    snprintf(buf, 32, "%.6f", isfinite(v) ? v : 0.0);
}

static void state_key(char *out, size_t n, char kind, const char *id)
{
    snprintf(out, n, "tokterm:%c:%s", kind, id);
}

enum state_verdict state_admit(struct state *st, const char *qid, const char *epid,
                               const struct state_dim d[2], double max_book, int no_limits,
                               double *wait)
{
    *wait = 0;
    char kq[48], kb[48], a[9][32];
    state_key(kq, sizeof kq, 'q', qid);
    state_key(kb, sizeof kb, 'b', epid);
    for (int i = 0; i < 2; i++) {
        state_fmt(a[4 * i], d[i].cap);
        state_fmt(a[4 * i + 1], d[i].rate);
        state_fmt(a[4 * i + 2], d[i].cost);
        state_fmt(a[4 * i + 3], d[i].level);
    }
    state_fmt(a[8], max_book);
    const char *keys[2] = {kq, kb}, *args[11];
    for (int i = 0; i < 9; i++)
        args[i] = a[i];
    args[9] = no_limits ? "1" : "0";
    args[10] = st->who;
    redisReply *r = state_eval(st, LUA_ADMIT, 2, keys, 11, args);
    if (!r)
        return STATE_LOCAL;
    enum state_verdict v = STATE_LOCAL;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
        r->element[0]->type == REDIS_REPLY_INTEGER && r->element[1]->type == REDIS_REPLY_STRING &&
        r->element[2]->type == REDIS_REPLY_INTEGER) {
        st->peers = (int)r->element[2]->integer;
        long long code = r->element[0]->integer;
        double w = strtod(r->element[1]->str, NULL);
        if (code >= STATE_GO && code <= STATE_COOL && isfinite(w) && w >= 0) {
            v = (enum state_verdict)code;
            *wait = w;
        }
    }
    freeReplyObject(r);
    return v;
}

void state_report(struct state *st, const char *qid, const struct state_dim d[2], int no_limits)
{
    char kq[48], a[7][32];
    state_key(kq, sizeof kq, 'q', qid);
    for (int i = 0; i < 2; i++) {
        state_fmt(a[i], d[i].level >= 0 ? d[i].level : -1);
        state_fmt(a[2 + 2 * i], d[i].cap > 0 && d[i].rate > 0 ? d[i].cap : 0);
        state_fmt(a[3 + 2 * i], d[i].cap > 0 && d[i].rate > 0 ? d[i].rate : 0);
    }
    snprintf(a[6], sizeof a[6], "%d", no_limits ? 1 : 0);
    const char *keys[1] = {kq}, *args[7] = {a[0], a[1], a[2], a[3], a[4], a[5], a[6]};
    state_send(st, LUA_REPORT, 1, keys, 7, args);
}

void state_cool(struct state *st, const char *qid, double cool)
{
    char kq[48], a[32];
    state_key(kq, sizeof kq, 'q', qid);
    state_fmt(a, cool > 0 ? (cool < STATE_COOL_MAX ? cool : STATE_COOL_MAX) : 0);
    const char *keys[1] = {kq}, *args[1] = {a};
    state_send(st, LUA_COOL, 1, keys, 1, args);
}

void state_breaker(struct state *st, const char *epid, int success, int threshold,
                   double cooldown)
{
    char kb[48], a[3][32];
    state_key(kb, sizeof kb, 'b', epid);
    snprintf(a[0], sizeof a[0], "%d", success ? 1 : 0);
    snprintf(a[1], sizeof a[1], "%d", threshold > 0 ? threshold : 5);
    state_fmt(a[2], cooldown > 0 ? cooldown : 30);
    const char *keys[1] = {kb}, *args[3] = {a[0], a[1], a[2]};
    state_send(st, LUA_BREAKER, 1, keys, 3, args);
}

const char *state_take_warning(struct state *st)
{
    if (!st || !st->warning[0])
        return NULL;
    memcpy(st->shown, st->warning, sizeof st->shown);
    st->warning[0] = '\0';
    return st->shown;
}

int state_peers(const struct state *st)
{
    return st ? st->peers : 0;
}

int state_connected(const struct state *st)
{
    return st && st->c != NULL;
}

void state_counts(const struct state *st, unsigned long *calls, unsigned long *fallbacks)
{
    *calls = st ? st->calls : 0;
    *fallbacks = st ? st->fallbacks : 0;
}
