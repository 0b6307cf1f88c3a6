// A client of toolagent's MCP server written against the official
// TypeScript SDK, driven one command at a time: the Go test writes a JSON
// command per line on stdin and reads one JSON answer per line on stdout,
// so it can approve, restart the daemon and reconnect between calls.
//   {"op":"connect","mode":"stdio","command":EXE,"args":[...]}
//   {"op":"connect","mode":"http","url":URL,"token":TOKEN}
//   {"op":"call","name":TOOL,"arguments":{...}}  -> {isError, text, structured}
//   {"op":"callTask","name":TOOL,"arguments":{...}} -> the first message
//       of client.experimental.tasks.callToolStream (taskCreated); the
//       stream goes on in the background
//   {"op":"awaitTask"} -> every message of that stream after the first,
//       once it ended (the last is the result or an error)
//   {"op":"getTask"|"taskResult"|"cancelTask","taskId":ID}
//   {"op":"close"}
import path from 'node:path';
import readline from 'node:readline';
import { pathToFileURL } from 'node:url';

const base = path.join(process.env.MCP_SDK_DIR, 'node_modules/@modelcontextprotocol/sdk/dist/esm');
const load = (p) => import(pathToFileURL(path.join(base, p)).href);
const { Client } = await load('client/index.js');
const { StdioClientTransport } = await load('client/stdio.js');
const { StreamableHTTPClientTransport } = await load('client/streamableHttp.js');
const { CallToolResultSchema } = await load('types.js');

let client = null;
let stream = null; // the messages and end of the last callTask

const text = (res) => ({ isError: res.isError ?? false, text: res.content?.[0]?.text ?? '', structured: res.structuredContent ?? null, meta: res._meta ?? null });
const ops = {
  async connect(c) {
    const transport = c.mode === 'stdio'
      ? new StdioClientTransport({ command: c.command, args: c.args, env: { ...process.env } })
      : new StreamableHTTPClientTransport(new URL(c.url), c.token ? { requestInit: { headers: { Authorization: `Bearer ${c.token}` } } } : undefined);
    client = new Client({ name: 'toolagent-ts-driver', version: '0.0.0' });
    await client.connect(transport);
    // tools/list tells the client which tools may be called as tasks.
    const { tools } = await client.listTools();
    return { server: client.getServerVersion(), capabilities: client.getServerCapabilities(), tools };
  },
  async call(c) {
    const res = await client.callTool({ name: c.name, arguments: c.arguments });
    return text(res);
  },
  async callTask(c) {
    const it = client.experimental.tasks.callToolStream({ name: c.name, arguments: c.arguments });
    const first = await it.next();
    const rest = [];
    const done = (async () => {
      try {
        for await (const m of it) rest.push(m.type === 'result' ? { type: 'result', ...text(m.result) } : m.type === 'error' ? { type: 'error', error: String(m.error?.message ?? m.error) } : m);
      } catch (e) {
        rest.push({ type: 'error', error: String(e) });
      }
    })();
    stream = { rest, done };
    return first.value;
  },
  async awaitTask() {
    await stream.done;
    return { messages: stream.rest };
  },
  async getTask(c) {
    return client.experimental.tasks.getTask(c.taskId);
  },
  async taskResult(c) {
    return text(await client.experimental.tasks.getTaskResult(c.taskId, CallToolResultSchema));
  },
  async cancelTask(c) {
    try {
      return { ok: await client.experimental.tasks.cancelTask(c.taskId) };
    } catch (e) {
      return { rpcError: { code: e.code, message: e.message } };
    }
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
