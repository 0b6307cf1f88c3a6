// A client of toolagent's MCP server written against another
// implementation: the official TypeScript SDK. TestMCPWithTheTypeScriptSDK
// runs it: node mcp-ts-client.mjs stdio COMMAND ARGS... | http URL
// It prints one JSON object with what it saw; the Go test judges it.
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const base = path.join(process.env.MCP_SDK_DIR, 'node_modules/@modelcontextprotocol/sdk/dist/esm');
const load = (p) => import(pathToFileURL(path.join(base, p)).href);
const { Client } = await load('client/index.js');
const { StdioClientTransport } = await load('client/stdio.js');
const { StreamableHTTPClientTransport } = await load('client/streamableHttp.js');

const [mode, target, ...args] = process.argv.slice(2);
const transport = mode === 'stdio'
  ? new StdioClientTransport({ command: target, args, env: { ...process.env } })
  : new StreamableHTTPClientTransport(new URL(target));
const client = new Client({ name: 'toolagent-ts-test', version: '0.0.0' });
await client.connect(transport);

const { tools } = await client.listTools();
const call = await client.callTool({ name: 'shell-exec', arguments: { cmd: 'echo 你好' } });
const bad = await client.callTool({ name: 'shell-exec', arguments: { nope: 1 } });
const find = await client.callTool({ name: 'find_tool', arguments: { intent: '查看最近的提交记录' } });
console.log(JSON.stringify({
  server: client.getServerVersion(),
  tools: tools.map((t) => ({ name: t.name, title: t.title, schemaType: t.inputSchema?.type, annotations: t.annotations ?? null })),
  call: { isError: call.isError ?? false, text: call.content?.[0]?.text ?? '' },
  bad: { isError: bad.isError ?? false },
  find: find.structuredContent ?? null,
}));
await client.close();
