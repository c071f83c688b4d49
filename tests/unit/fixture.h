/* fixture.h - shared helpers for tests that read tests/fixtures/NAME.sse. */
#ifndef TT_TEST_FIXTURE_H
#define TT_TEST_FIXTURE_H
#include <stdio.h>
#include <stdlib.h>

#include "tap.h"
#include "base/util.h"
#include "base/xmalloc.h"

static const char *const fixture_names[] = {
    "azure_filter.sse", "deepseek_keepalive.sse", "llamacpp_old_error.sse",
    "llamacpp_reasoning.sse", "ollama_reasoning.sse", "openai_length.sse",
    "openrouter_midstream_error.sse", "anthropic_text.sse", "anthropic_thinking.sse",
    "anthropic_overloaded.sse", "gemini_thinking.sse", "gemini_safety.sse",
    "gemini_max_tokens.sse", "gemini_blocked_prompt.sse", "gemini_midstream_error.sse",
    "responses_reasoning.sse", "responses_incomplete.sse", "responses_failed.sse",
    "responses_error.sse",
};
#define FIXTURE_COUNT (sizeof fixture_names / sizeof fixture_names[0])

/* Read tests/fixtures/NAME; aborts the test when missing. Caller frees. */
static char *fixture_read(const char *name, size_t *len)
{
    char *path = xasprintf("%s/fixtures/%s", tap_srcdir(), name);
    char *s = util_read_file(path, len, 0);
    if (!s) {
        printf("Bail out! cannot read %s\n", path);
        exit(1);
    }
    free(path);
    return s;
}

#endif
