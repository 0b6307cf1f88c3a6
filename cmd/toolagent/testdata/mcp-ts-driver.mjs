// A client of toolagent's MCP server written against the official
// TypeScript SDK, driven one command at a time: the Go test writes a JSON
// command per line on stdin and reads one JSON answer per line on stdout,
// so it can approve, restart the daemon and reconnect between calls.
//   {"op":"connect","mode":"stdio","command":EXE,"args":[...]}
//   {"op":"connect","mode":"http","url":URL,"token":TOKEN}
//   {"op":"call","name":TOOL,"arguments":{...}}  -> {isError, text, structured}
//   {"op":"close"}
import path from 'node:path';
import readline from 'node:readline';
import { pathToFileURL } from 'node:url';

const base = path.join(process.env.MCP_SDK_DIR, 'node_modules/@modelcontextprotocol/sdk/dist/esm');
const load = (p) => import(pathToFileURL(path.join(base, p)).href);
const { Client } = await load('client/index.js');
const { StdioClientTransport } = await load('client/stdio.js');
const { StreamableHTTPClientTransport } = await load('client/streamableHttp.js');

let client = null;
const ops = {
  async connect(c) {
    const transport = c.mode === 'stdio'
      ? new StdioClientTransport({ command: c.command, args: c.args, env: { ...process.env } })
      : new StreamableHTTPClientTransport(new URL(c.url), c.token ? { requestInit: { headers: { Authorization: `Bearer ${c.token}` } } } : undefined);
    client = new Client({ name: 'toolagent-ts-driver', version: '0.0.0' });
    await client.connect(transport);
    return { server: client.getServerVersion() };
  },
  async call(c) {
    const res = await client.callTool({ name: c.name, arguments: c.arguments });
    return { isError: res.isError ?? false, text: res.content?.[0]?.text ?? '', structured: res.structuredContent ?? null };
  },
  async close() {
    await client.close();
    client = null;
    return {};
  },
};

const rl = readline.createInterface({ input: process.stdin });
for await (const line of rl) {
  const c = JSON.parse(line);
  let out;
  try {
    out = await ops[c.op](c);
  } catch (e) {
    out = { error: String(e?.stack ?? e) };
  }
  process.stdout.write(JSON.stringify(out) + '\n');
}
if (client) await client.close();
