/* mcp.h - `tokterm mcp`: list the [mcp NAME] servers of the config file and their tools, or
 * call one tool directly (for scripts and debugging). */
#ifndef TT_CMD_MCP_H
#define TT_CMD_MCP_H
#include "core/conf.h"

/* argv[0] is "mcp". Exit status: 0; 1 the tool reported an error (isError); 2 bad usage or
 * configuration; 3 the server answered with a JSON-RPC error; 4 the server could not be
 * started, died or broke the protocol; 8 timeout or an answer over max_result_mb; 130
 * cancelled (Ctrl-C). */
int cmd_mcp(const struct conf *conf, int json, int argc, char **argv);

#endif
