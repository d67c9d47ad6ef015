// The official TypeScript MCP client against a Rastrillo app: list, read, write,
// approval by the user, the same call again. Steps come as JSON on argv; each result
// is printed as one JSON line, so the Python test drives the loop and does the approving.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { createInterface } from "node:readline";

const [url, token] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: "rastrillo-ts-test", version: "1.0.0" });

const out = (value) => process.stdout.write(JSON.stringify(value) + "\n");
try {
  await client.connect(transport);
  out({ step: "connected", protocolVersion: transport.protocolVersion ?? null });
  // One request per stdin line: {"list": true} or {"call": name, "args": {...}}.
  for await (const line of createInterface({ input: process.stdin })) {
    const step = JSON.parse(line);
    try {
      if (step.list) {
        out({ step: "list", result: await client.listTools() });
      } else {
        out({ step: "call", result: await client.callTool({ name: step.call, arguments: step.args }) });
      }
    } catch (error) {
      out({ step: "error", message: String(error?.message ?? error), code: error?.code ?? null });
    }
  }
} catch (error) {
  out({ step: "error", message: String(error?.message ?? error), code: error?.code ?? null });
} finally {
  await client.close();
}
