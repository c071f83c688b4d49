/* source.c - an MCP server as a source of tools for the registry (proto/tool.h, core/tools.h):
 * its tools are "SERVER.TOOL"; a call is tools/call with the registry's cancel flag, timeout,
 * size cap and progress. */
#include "config.h"
#include "mcp/mcp_int.h"

#include "base/utf8.h"
#include "base/xmalloc.h"

#include <stdlib.h>
#include <string.h>

#define MCP_SOURCE_GRACE 2.0 /* seconds a server gets to exit after its stdin closes */

static int mcp_source_list(struct tool_source *src, const int *cancel, struct tool_def **defs,
                           size_t *n, struct buf *err)
{
    const struct mcp_tool *t = NULL;
    int k = mcp_tools_run(src->self, cancel, &t, err);
    *defs = NULL;
    *n = 0;
    if (k < 0)
        return -1;
    *defs = xcalloc((size_t)k + 1, sizeof **defs);
    for (int i = 0; i < k; i++) {
        (*defs)[i].name = xstrdup(t[i].name);
        (*defs)[i].description = xstrdup(t[i].description);
        (*defs)[i].schema = xstrdup(t[i].input_schema);
    }
    *n = (size_t)k;
    return 0;
}

static int mcp_source_call(struct tool_source *src, const char *tool, const char *args,
                           size_t args_len, const struct tool_ctx *ctx, struct tool_result *out)
{
    struct mcp_result r;
    char *a = xstrndup(args ? args : "", args ? args_len : 0);
    mcp_call_run(src->self, tool, a, ctx->progress, ctx->ud, ctx->cancel, ctx->timeout, &r);
    free(a);
    int rc = 0;
    if (r.status == MCP_OK) {
        size_t cap = ctx->max_bytes ? ctx->max_bytes : (size_t)16 << 20;
        out->is_error = r.is_error;
        size_t n = r.text.len;
        if (n > cap) { /* cut where no UTF-8 sequence is split, and say so */
            n = utf8_cut(r.text.data, n, cap);
            out->truncated = 1;
        }
        buf_append(&out->content, r.text.data ? r.text.data : "", n);
        if (out->truncated)
            buf_printf(&out->content, "\n[truncated: %zu of %zu bytes]", n, r.text.len);
        if (!r.text.len && r.structured)
            buf_appends(&out->content, r.structured);
        out->structured = r.structured;
        r.structured = NULL;
    } else {
        tool_result_error(out, "%s", r.error.data ? r.error.data : "the MCP call failed");
        if (r.diag.len) /* the server's stderr may hold paths or tokens: shown, not sent */
            out->note = xstrndup(r.diag.data, r.diag.len);
        rc = r.status == MCP_RPC_ERROR || r.status == MCP_CANCELLED ? 0 : -1;
    }
    mcp_result_free(&r);
    return rc;
}

static void mcp_source_close(struct tool_source *src)
{
    mcp_client_free(src->self, MCP_SOURCE_GRACE);
    free((char *)src->name);
    free(src);
}

struct tool_source *mcp_source_new(const struct mcp_server_conf *conf, mcp_key_fn get_key)
{
    struct tool_source *src = xcalloc(1, sizeof *src);
    src->name = xstrdup(conf->name);
    src->kind = "mcp";
    src->self = mcp_client_new(conf, get_key);
    src->parallel = 1;
    src->list = mcp_source_list;
    src->call = mcp_source_call;
    src->close = mcp_source_close;
    return src;
}
