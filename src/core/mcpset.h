/* mcpset.h - the MCP servers of a configuration (mcp/mcp.h): the [mcp NAME] sections of the
 * config file, a client for each made on first use, the ones `mcp = a, b` / --mcp enable, and
 * the key command of an HTTP server run as api_key_cmd is. A config file with a section that
 * runs a command must pass conf_file_trusted, as for api_key_cmd. */
#ifndef TT_MCPSET_H
#define TT_MCPSET_H
#include "base/buf.h"
#include "core/conf.h"
#include "mcp/mcp.h"

struct mcp_set {
    struct mcp_server_conf *confs;
    int n;
    struct mcp_client **clients; /* n of them, NULL until first used */
};

/* Read the sections of c's config file. 0 (none is fine), or -1 with err set (a bad section,
 * or a command in a file others can change). */
int mcp_set_load(struct mcp_set *s, const struct conf *c, struct buf *err);
/* The client of server name (made on first use; it starts on first use too), or NULL with err
 * set to "no [mcp NAME] section (known: ...)". */
struct mcp_client *mcp_set_get(struct mcp_set *s, const char *name, struct buf *err);
/* The enabled names of c->mcp ("a, b"), each checked: a NULL-terminated array of new strings
 * (NULL when none is enabled), or NULL with err set. Free with util_strv_free. */
char **mcp_set_enabled(const struct mcp_set *s, const struct conf *c, struct buf *err);
/* Stop every server that was started (grace seconds each for a clean exit) and free. */
void mcp_set_free(struct mcp_set *s, double grace);

/* Check what c enables (c->mcp): the sections exist and are well formed, the file may run
 * them. 0 (also when nothing is enabled), or -1 with err set: exit 2, before anything runs. */
int mcp_set_check(const struct conf *c, struct buf *err);

/* Add each server c enables (c->mcp: `mcp = a, b` in the profile or role, or --mcp) to the
 * registry t as a source of tools (mcp_source_new: "NAME.TOOL"; nothing starts before the
 * registry lists or calls it). Returns how many were added, or -1 with err set (a bad
 * section, an unknown name, a command in a file others can change): exit 2. */
struct tools;
int mcp_set_tools(struct tools *t, const struct conf *c, struct buf *err);

/* The registry of a front end (scripted mode, the chat): the servers c enables
 * (mcp_set_tools) and, when TOKTERM_TEST_TOOLS is set, the test tools (tools_add_test); NULL
 * when there are none. NULL with err set on a bad section or name (exit 2). The tools are
 * listed by the first request (tools_load: the servers start then). */
struct tools *mcp_set_registry(const struct conf *c, struct buf *err);

/* The tools the sections of the servers c enables allow (`allow = read_file, search` in
 * [mcp fs]: "fs.read_file", "fs.search"), added to policy p: the chat runs them without
 * asking. 0, or -1 with err set as mcp_set_tools. */
struct tool_policy;
int mcp_set_allow(struct tool_policy *p, const struct conf *c, struct buf *err);

/* Everything a front end runs without asking, into p: the --allow-tool globs (n of them), the
 * config's `allow = fs.read_file, *.search` and the enabled servers' `allow =`
 * (mcp_set_allow). 0, or -1 with err set as mcp_set_tools (p still holds the rest). */
int mcp_set_policy(struct tool_policy *p, const struct conf *c, const char *const *globs,
                   int n, struct buf *err);

#endif
