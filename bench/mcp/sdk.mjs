// One stdio tools/call of server-everything's echo with the official MCP TypeScript SDK client:
// spawn, initialize, call, close (bench/mcp/run.py times it next to `tokterm mcp call`).
// usage: node sdk.mjs NODE_MODULES_DIR SERVER_JS
const [dir, server] = process.argv.slice(2);
const sdk = (p) => import(new URL("file://" + dir + "/@modelcontextprotocol/sdk/dist/esm/" + p));
const { Client } = await sdk("client/index.js");
const { StdioClientTransport } = await sdk("client/stdio.js");
const client = new Client({ name: "bench", version: "1.0.0" });
await client.connect(new StdioClientTransport({ command: process.execPath,
                                                args: [server, "stdio"] }));
const r = await client.callTool({ name: "echo", arguments: { message: "hi" } });
process.stdout.write(r.content[0].text + "\n");
await client.close();
