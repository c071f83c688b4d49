/* ctxbench.c - cost of context_plan() on long histories: the first plan (every message
 * tokenised) and later plans of the same history (counts from the cache), with a window that
 * holds everything and one that forces dropping. Usage: ctxbench [MESSAGES] (default 2000). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "tokens/context.h"
#include "base/util.h"
#include "base/xmalloc.h"

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 2000;
    if (n < 2)
        n = 2;
    static const char *const w[] = {"river", "stone", "lamp", "orange", "quiet", "window",
                                    "paper", "seven"};
    struct context_msg *m = xcalloc((size_t)n, sizeof *m);
    size_t bytes = 0;
    for (int i = 0; i < n; i++) {
        char buf[600];
        size_t k = (size_t)snprintf(buf, sizeof buf, "msg %d:", i);
        for (int j = 0; k < 500; j++)
            k += (size_t)snprintf(buf + k, sizeof buf - k, " %s", w[(i + j * 3) % 8]);
        m[i] = (struct context_msg){i == 0 ? "system" : i % 2 ? "user" : "assistant",
                                    xstrdup(buf), k, i + 1, 0, 0};
        bytes += k;
    }
    struct context *c = context_new("o200k_base", 0, NULL);
    const long windows[2] = {100000000, 32000};
    for (int wi = 0; wi < 2; wi++) {
        struct context_params p = {.window = windows[wi], .reserve = 4096,
                                   .policy = CONTEXT_TRUNCATE};
        double best = 1e9, first = -1;
        struct context_plan plan;
        for (int rep = 0; rep < 15; rep++) {
            double t0 = util_now();
            context_plan(c, m, (size_t)n, &p, &plan);
            double t = util_now() - t0;
            if (first < 0)
                first = t;
            else if (t < best)
                best = t;
            if (rep < 14)
                context_plan_free(&plan);
        }
        printf("window %ld: %d messages, %.2f MB -> %zu sent, %ld tokens; first plan %.2f ms, "
               "cached best %.3f ms\n", windows[wi], n, (double)bytes / 1e6, plan.n_items,
               plan.total, first * 1e3, best * 1e3);
        context_plan_free(&plan);
    }
    context_free(c);
    for (int i = 0; i < n; i++)
        free((char *)m[i].content);
    free(m);
    return 0;
}
