// The official TypeScript MCP SDK's OAuth client against a Rastrillo app: discovery,
// dynamic registration, the authorization URL, then the token exchange and a tool list.
// Each step prints one JSON line; the Python test plays the person who allows, and
// sends the code it got back on stdin. Token values are never printed.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { auth } from "@modelcontextprotocol/sdk/client/auth.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { randomBytes } from "node:crypto";
import { createInterface } from "node:readline";

const [serverUrl, redirectUrl] = process.argv.slice(2);
const out = (value) => process.stdout.write(JSON.stringify(value) + "\n");
const state = randomBytes(16).toString("hex");
let clientInformation;
let tokens;
let verifier;

const provider = {
  get redirectUrl() {
    return redirectUrl;
  },
  get clientMetadata() {
    return { client_name: "TypeScript Agent", redirect_uris: [redirectUrl] };
  },
  state: () => state,
  clientInformation: () => clientInformation,
  saveClientInformation(info) {
    clientInformation = info;
    out({ step: "registered", client_id: info.client_id, method: info.token_endpoint_auth_method ?? null });
  },
  tokens: () => tokens,
  saveTokens(saved) {
    tokens = saved;
    out({ step: "tokens", expires_in: saved.expires_in, refresh: Boolean(saved.refresh_token) });
  },
  redirectToAuthorization(url) {
    out({ step: "authorize", url: url.href, state });
  },
  saveCodeVerifier(value) {
    verifier = value;
  },
  codeVerifier: () => verifier,
};

try {
  out({ step: "started", result: await auth(provider, { serverUrl }) });
  const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
  const code = (await lines.next()).value;
  out({ step: "exchanged", result: await auth(provider, { serverUrl, authorizationCode: code }) });
  if (process.argv[4] === "list") {
    const client = new Client({ name: "rastrillo-ts-oauth", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(new URL(serverUrl), { authProvider: provider }));
    out({ step: "list", tools: (await client.listTools()).tools.map((t) => t.name) });
    await client.close();
  }
} catch (error) {
  out({ step: "error", message: String(error?.message ?? error) });
  process.exitCode = 1;
}
process.exit();
