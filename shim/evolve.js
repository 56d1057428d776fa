// evolve: the opencode plugin that connects an opencode agent to its evolve engine.
//
// One plain ES module with only function exports and no npm dependencies (opencode rejects a module
// with any non-function export, and resolves no packages next to a plugin file). The shim forwards
// every opencode hook to the engine (a long-lived `evolve serve` process for the workspace, started
// here when none runs) and applies what comes back. It decides nothing itself. It awaits the engine
// only where the answer can change what opencode does (a system prompt, a tool stage some hook
// handles, a compaction prompt, a tool call); everything else is sent without waiting and the engine
// acknowledges it at once.
//
// Options (second element of the plugin tuple in opencode.json, written by `evolve shim install`):
//   workspace       the evolve workspace (default $OPENCODE_EVOLVE_WORKSPACE, else ~/workspace)
//   command         argv that runs evolve, e.g. ["/path/python", "-m", "engine"] (default ["evolve"])
//   startTimeoutMs  how long to wait for a new engine to answer (default 20000)

import { spawn } from "node:child_process";
import { appendFileSync, mkdirSync, openSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join, resolve } from "node:path";

// opencode may initialise a plugin twice in one process (seen in the TUI): reuse the first instance.
const instances = new Map();

export default async function evolvePlugin(input, options) {
  const key = JSON.stringify([input?.directory, options?.workspace || null]);
  // A disposed instance (e.g. after opencode's instance/dispose) is forgotten, so the next
  // initialisation connects afresh with a new proxy.
  if (!instances.has(key)) instances.set(key, new Shim(input, options || {}, () => instances.delete(key)).init());
  return await instances.get(key);
}

function Shim(input, options, forget) {
  const SHIM_VERSION = "0.1.0";
  const API_VERSION = "2";
  const HANDLED_HEADER = "x-evolve-handled";
  const env = process.env;
  const workspace = resolve(
    (options.workspace || env.OPENCODE_EVOLVE_WORKSPACE || env.OPENCODE_SIDECAR_WORKSPACE || join(homedir(), "workspace"))
      .replace(/^~(?=$|\/)/, homedir()),
  );
  const stateDir = join(workspace, "state");
  const command = Array.isArray(options.command) && options.command.length ? options.command : ["evolve"];
  const startTimeoutMs = Number(options.startTimeoutMs) || 20000;
  const directory = input.directory || process.cwd();

  let engine = null; // {url, token}
  let engineDown = false;
  let reconnecting = null;
  let connectionId = null;
  let proxy = null; // {url, token, server}
  let initDone = false;
  const inflight = new Set();
  const pendingHistory = new Map(); // session id -> messages not yet sent to the engine
  const messageParts = new Map(); // assistant message id -> Map(part id -> part)
  const turnOf = new Map(); // assistant message id -> the user message it answers (its turn)
  const messageKind = new Map(); // assistant message id -> {agent, summary}: whose answer it is
  const lastUser = new Map(); // session id -> its latest user message id
  const handledMessages = new Set();
  const toolSpecs = new Map();
  const toolIds = new Set(); // every tool opencode defined for a request (tool.definition)
  // The stages some hook handles, as the engine last said (connect answer, then HANDLED_HEADER).
  let handled = new Set();
  const frozenSystems = new Map(); // session id -> the system prompt the engine froze for it
  const turnSystems = new Map(); // session id -> parts a before_turn hook added to its next request only
  // What the engine last heard of each session's title and status: opencode repeats both at every
  // step of a turn (about 4 events per tool call), and the engine needs only a change.
  const sessionTold = new Map(); // session id -> {title, status}
  let ownCallPrefixes = [];

  // ---- logging ----------------------------------------------------------------------------------

  function log(level, message) {
    const line = `${new Date().toISOString()} ${level} ${message}\n`;
    try {
      mkdirSync(stateDir, { recursive: true });
      appendFileSync(join(stateDir, "shim.log"), line);
    } catch {}
    // opencode's own log, without awaiting its API (never during init: see the init deadlock).
    if (initDone && input.client?.app?.log) {
      input.client.app.log({ body: { service: "evolve", level, message } }).catch(() => {});
    } else if (level !== "debug") {
      setTimeout(() => input.client?.app?.log?.({ body: { service: "evolve", level, message } })?.catch?.(() => {}), 0);
    }
  }

  // ---- the engine -------------------------------------------------------------------------------

  function readAnnouncement() {
    try {
      const data = JSON.parse(readFileSync(join(stateDir, "engine.json"), "utf8"));
      if (data && data.url && data.token) return { url: data.url, token: data.token, api: String(data.api) };
    } catch {}
    return null;
  }

  async function request(path, body, { timeoutMs = 30000, method = "POST", target = engine } = {}) {
    if (!target) throw new Error("no engine");
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), timeoutMs);
    try {
      const resp = await fetch(target.url + path, {
        method,
        headers: {
          authorization: `Bearer ${target.token}`,
          "content-type": "application/json",
          "x-evolve-api": API_VERSION,
          // Which opencode this is, so the engine knows the connection each session came through.
          ...(connectionId ? { "x-evolve-connection": connectionId } : {}),
        },
        body: method === "GET" ? undefined : JSON.stringify(body ?? {}),
        signal: controller.signal,
      });
      const stages = resp.headers.get(HANDLED_HEADER);
      if (stages !== null) handled = new Set(stages.split(",").filter(Boolean));
      const text = await resp.text();
      let data = null;
      try {
        data = text ? JSON.parse(text) : null;
      } catch {}
      if (resp.status === 409) {
        const err = new Error((data && data.error) || "incompatible evolve engine and shim");
        err.incompatible = true;
        throw err;
      }
      if (resp.status === 503 && data && data.journal === "failing") {
        // The engine is up but refuses work it could not record (its journal cannot write).
        const err = new Error((data && data.error) || "the evolve engine's journal cannot write");
        err.refused = true;
        throw err;
      }
      if (!resp.ok) throw new Error(`engine ${path}: HTTP ${resp.status}: ${(data && data.error) || text.slice(0, 300)}`);
      return data;
    } finally {
      clearTimeout(timer);
    }
  }

  async function healthy(target) {
    try {
      const h = await request("/v1/health", null, { method: "GET", timeoutMs: 1500, target });
      return h && h.ok;
    } catch (err) {
      if (err.incompatible) throw err;
      return false;
    }
  }

  function startEngine() {
    mkdirSync(stateDir, { recursive: true });
    const out = openSync(join(stateDir, "engine.log"), "a");
    const child = spawn(command[0], [...command.slice(1), "serve", "--workspace", workspace], {
      cwd: workspace,
      detached: true, // the engine outlives this opencode process and its process group
      stdio: ["ignore", out, out],
      env: { ...env, OPENCODE_EVOLVE_WORKSPACE: workspace },
    });
    child.on("error", (err) => log("error", `cannot start the evolve engine (${command.join(" ")}): ${err.message}`));
    child.unref();
    log("info", `started the evolve engine for ${workspace} (pid ${child.pid})`);
  }

  async function findOrStartEngine() {
    let found = readAnnouncement();
    if (found && (await healthy(found))) return found;
    startEngine();
    const deadline = Date.now() + startTimeoutMs;
    while (Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      found = readAnnouncement();
      if (found && (await healthy(found))) return found;
    }
    throw new Error(`the evolve engine for ${workspace} did not answer within ${startTimeoutMs} ms; see ${join(stateDir, "engine.log")}`);
  }

  async function connect() {
    engine = await findOrStartEngine();
    const resp = await request("/v1/opencode/connect", {
      url: proxy ? proxy.url : input.serverUrl?.toString?.() || "",
      token: proxy ? proxy.token : null,
      directory,
      mode: proxy ? "in-process" : "server",
      shim_version: SHIM_VERSION,
      // opencode's subcommand (run, serve; none in the TUI's worker): whether a later turn can start.
      command: process.argv.slice(2).find((a) => typeof a === "string" && !a.startsWith("-")) || null,
    });
    connectionId = resp.id;
    sessionTold.clear(); // a new (or restarted) engine has heard nothing yet
    ownCallPrefixes = Array.isArray(resp.own_call_prefixes) ? resp.own_call_prefixes : [];
    if (Array.isArray(resp.handled)) handled = new Set(resp.handled);
    engineDown = false;
  }

  // A call to the engine that never breaks opencode: on failure it reconnects (starting a new engine
  // if needed) once, then gives up with a warning and the hook does nothing. A refusal (the engine's
  // journal cannot write) is reported as such, at most once a minute, and the hook does nothing; with
  // `opts.report` the caller gets {refused: message} instead of null.
  let lastRefusal = 0;
  async function call(path, body, opts) {
    const attempt = async () => request(path, body, opts);
    const p = (async () => {
      if (engineDown) await reconnect();
      try {
        return await attempt();
      } catch (err) {
        if (err.incompatible) {
          log("error", err.message);
          return null;
        }
        if (err.refused) {
          if (Date.now() - lastRefusal > 60000) log("error", `evolve engine refused ${path}: ${err.message}`);
          lastRefusal = Date.now();
          return opts && opts.report ? { refused: err.message } : null;
        }
        if (!engineDown) log("warn", `evolve engine unreachable (${err.message}); hooks are no-ops until it is back`);
        engineDown = true;
        await reconnect();
        if (engineDown) return null;
        try {
          return await attempt();
        } catch (err2) {
          log("warn", `evolve engine call ${path} failed after reconnecting: ${err2.message}`);
          return null;
        }
      }
    })();
    inflight.add(p);
    p.finally(() => inflight.delete(p));
    return p;
  }

  function fire(path, body) {
    call(path, body, { timeoutMs: 10000 }).catch(() => {});
  }

  async function reconnect() {
    if (!reconnecting) {
      reconnecting = (async () => {
        try {
          await connect();
          log("info", "reconnected to the evolve engine");
        } catch (err) {
          log("warn", `evolve engine still unavailable: ${err.message}`);
        } finally {
          reconnecting = null;
        }
      })();
    }
    await reconnecting;
  }

  // ---- opencode's API for the engine, when opencode has no port of its own -----------------------

  function startProxy() {
    const cfg = input.client?._client?.getConfig?.();
    if (!cfg || typeof cfg.fetch !== "function" || typeof Bun === "undefined") return null;
    const token = randomToken();
    const server = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      idleTimeout: 0,
      async fetch(req) {
        if (req.headers.get("authorization") !== `Bearer ${token}`) {
          return new Response(JSON.stringify({ error: "unauthorized" }), { status: 401 });
        }
        const url = new URL(req.url);
        const headers = new Headers(req.headers);
        headers.delete("host");
        headers.delete("authorization");
        // Bun's fetch unzips a compressed answer but keeps its content-encoding header, which
        // would make the engine unzip it again: ask for none, and drop any that comes anyway.
        headers.delete("accept-encoding");
        if (!headers.has("x-opencode-directory")) headers.set("x-opencode-directory", directory);
        const init = { method: req.method, headers };
        if (req.method !== "GET" && req.method !== "HEAD") init.body = await req.arrayBuffer();
        const resp = await cfg.fetch(new Request(new URL(url.pathname + url.search, cfg.baseUrl), init));
        if (!resp.headers.has("content-encoding")) return resp;
        const out = new Headers(resp.headers);
        out.delete("content-encoding");
        out.delete("content-length");
        return new Response(resp.body, { status: resp.status, statusText: resp.statusText, headers: out });
      },
    });
    return { url: `http://127.0.0.1:${server.port}`, token, server };
  }

  function randomToken() {
    const bytes = new Uint8Array(32);
    crypto.getRandomValues(bytes);
    return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  }

  // ---- hooks ------------------------------------------------------------------------------------

  function takeHistory(session) {
    if (!session || !pendingHistory.has(session)) return undefined;
    const history = pendingHistory.get(session);
    pendingHistory.delete(session);
    return history;
  }

  function trackPart(part) {
    if (!part || !part.messageID || !part.id) return;
    let parts = messageParts.get(part.messageID);
    if (!parts) messageParts.set(part.messageID, (parts = new Map()));
    parts.set(part.id, { ...part });
  }

  function applyDelta(props) {
    const part = messageParts.get(props.messageID)?.get(props.partID);
    if (part && props.field && typeof props.delta === "string") part[props.field] = (part[props.field] || "") + props.delta;
  }

  function assistantFinished(info) {
    if (handledMessages.has(info.id)) return;
    handledMessages.add(info.id);
    const own = info.summary || info.agent === "compaction" || info.mode === "compaction" || info.agent === "title";
    // opencode's own summary is not the agent's answer: only its token count goes to the engine.
    const parts = own ? [] : [...(messageParts.get(info.id)?.values() || [])];
    messageParts.delete(info.id);
    const message = {
      id: info.id,
      agent: info.agent || info.mode,
      finish: info.finish,
      providerID: info.providerID,
      modelID: info.modelID,
      tokens: info.tokens,
      error: info.error,
      summary: own ? true : undefined,
      turn: info.parentID || turnOf.get(info.id),
    };
    turnOf.delete(info.id);
    messageKind.delete(info.id);
    // Accepted at once: observe_message, idle and before_stop run in the engine, which sends a
    // `continue` to opencode itself.
    fire("/v1/opencode/assistant", {
      session: info.sessionID,
      message,
      parts,
      history: own ? undefined : takeHistory(info.sessionID),
    });
  }

  // What the agent said in the message that is calling a tool, up to the call: its text and its
  // reasoning, kept by the engine as the provenance of a change the call makes.
  function sayingSoFar(messageID) {
    const parts = [...(messageParts.get(messageID)?.values() || [])];
    const texts = (type) => parts.filter((p) => p.type === type && p.text).map((p) => p.text).join("\n");
    return { text: texts("text"), reasoning: texts("reasoning") };
  }

  function makeTool(spec) {
    const args = {};
    for (const [key, schema] of Object.entries(spec.parameters?.properties || {})) args[key] = schema;
    return {
      description: spec.description || spec.name,
      args,
      async execute(callArgs, ctx) {
        const session = ctx?.sessionID;
        const body = {
          args: callArgs || {},
          session,
          call_id: ctx?.callID,
          context: sayingSoFar(ctx?.messageID),
          permission: "not asked",
          turn: turnOf.get(ctx?.messageID),
        };
        if (spec.asks) {
          const perm = await call(`/v1/tools/${spec.name}/permission`, { args: callArgs || {}, call_id: ctx?.callID });
          if (perm && perm.ask) {
            try {
              await ctx.ask({ permission: perm.ask.permission, patterns: perm.ask.patterns, always: perm.ask.patterns, metadata: {} });
              body.permission = "allowed by opencode";
            } catch (err) {
              // Denied: the tool fails with opencode's message and the hook never runs; the engine
              // records the refused call.
              await call(`/v1/tools/${spec.name}/call`, { ...body, permission: "denied by opencode", refused: String(err?.message || err) });
              throw err;
            }
          }
        }
        body.history = takeHistory(session);
        const result = await call(`/v1/tools/${spec.name}/call`, body, { timeoutMs: 30 * 60 * 1000, report: true });
        if (!result) return `tool error: the evolve engine for ${workspace} is not reachable; see ${join(stateDir, "shim.log")}`;
        if (result.refused) return `tool error: ${result.refused}`;
        return typeof result.output === "string" ? result.output : JSON.stringify(result.output);
      },
    };
  }

  // The tools opencode offers the model (its own and evolve's), sent to the engine when they change,
  // so that the console can show what the model was offered.
  const offered = new Map();
  let offeredSent = "";
  let offeredTimer = null;
  function noteOffered(toolID, output) {
    let parameters = output?.jsonSchema;
    if (!parameters) {
      try {
        parameters = output?.parameters?.toJSONSchema?.() ?? undefined;
      } catch {}
    }
    offered.set(toolID, { name: toolID, description: output?.description || "", parameters: parameters ?? null });
    if (!offeredTimer) {
      offeredTimer = setTimeout(() => {
        offeredTimer = null;
        const tools = [...offered.values()];
        const text = JSON.stringify(tools);
        if (text !== offeredSent && connectionId) {
          offeredSent = text;
          fire("/v1/opencode/tools-offered", { tools });
        }
      }, 0);
    }
  }

  // Whether a session event only repeats what the engine was last told: an update with the same
  // title, a status of the same type. Every other session event is news.
  function alreadyTold(type, props) {
    const id = props.sessionID || props.info?.id;
    if (!id) return false;
    const told = sessionTold.get(id) || {};
    if (type === "session.deleted") sessionTold.delete(id);
    else if (type === "session.idle") sessionTold.set(id, { ...told, status: "idle" });
    if (type !== "session.status" && type !== "session.updated") return false;
    if (type === "session.status") {
      const status = props.status?.type;
      if (told.status === status) return true;
      sessionTold.set(id, { ...told, status });
    } else {
      const title = props.info.title || "";
      if (told.title === title) return true;
      sessionTold.set(id, { ...told, title });
    }
    return false;
  }

  const hooks = {
    event: async ({ event }) => {
      const type = event?.type || "";
      const props = event?.properties || {};
      if (type === "message.part.updated") {
        trackPart(props.part);
        // A failed tool call never reaches tool.execute.after: the engine learns of it here.
        if (props.part?.type === "tool" && props.part.state?.status === "error") fire("/v1/opencode/event", { type, properties: props });
      } else if (type === "message.part.delta") applyDelta(props);
      else if (type === "permission.asked" || type === "permission.replied") fire("/v1/opencode/event", { type, properties: props });
      else if (type === "message.updated") {
        const info = props.info || {};
        if (info.role === "assistant" && info.id && info.parentID) turnOf.set(info.id, info.parentID);
        if (info.role === "assistant" && info.id) messageKind.set(info.id, { agent: info.agent || info.mode, summary: info.summary || undefined });
        // A response is over when it has a finish reason (as early as opencode tells) or, failing
        // that, when it is completed.
        if (info.role === "assistant" && (info.finish || info.time?.completed)) assistantFinished(info);
      } else if (type.startsWith("session.") && type !== "session.diff" && !alreadyTold(type, props)) {
        fire("/v1/opencode/event", { type, properties: props });
      }
    },

    "chat.message": async (i, o) => {
      const msg = o?.message || {};
      const parts = Array.isArray(o?.parts) ? o.parts : [];
      // Notifications and heartbeat prompts are sent as synthetic text: they say nothing of the chat.
      const synthetic = parts.length > 0 && parts.every((p) => p?.synthetic === true);
      const session = i?.sessionID || msg.sessionID;
      const resp = await call("/v1/opencode/chat-message", { session, agent: i?.agent || msg.agent, model: i?.model || msg.model, synthetic }, { timeoutMs: 5000 });
      // The operator refreshed the session's prompt (after a revert): compose it anew next time.
      if (resp && resp.frozen === false) frozenSystems.delete(session);
    },

    "experimental.chat.messages.transform": async (_i, o) => {
      const messages = o?.messages || [];
      const session = messages.find((m) => m?.info?.sessionID)?.info.sessionID;
      if (!session) return;
      const users = messages.filter((m) => m?.info?.role === "user" && m.info.id);
      if (users.length) lastUser.set(session, users[users.length - 1].info.id);
      const history = messages.map((m) => ({ info: { role: m.info?.role, agent: m.info?.agent }, parts: m.parts || [] }));
      if (!handled.has("before_turn")) return void pendingHistory.set(session, history);
      // Before an LLM round trip: awaited only when a hook handles before_turn.
      pendingHistory.delete(session);
      turnSystems.delete(session);
      const resp = await call("/v1/opencode/before-turn", { session, history, tools: toolIds.size ? [...toolIds] : undefined });
      // A skip can only fail the request: the loop ends with this text as its error.
      if (resp && typeof resp.skip === "string" && resp.skip) throw new Error(resp.skip);
      if (resp && Array.isArray(resp.system) && resp.system.length) turnSystems.set(session, resp.system);
    },

    "experimental.chat.system.transform": async (i, o) => {
      if (!i?.sessionID || !Array.isArray(o?.system)) return;
      // opencode's own calls (title, compaction) keep its prompt; the engine decides, but a
      // prompt it froze for a session is reused here without asking on every LLM request.
      const first = typeof o.system[0] === "string" ? o.system[0] : "";
      const own = ownCallPrefixes.some((p) => first.startsWith(p));
      let system = own ? undefined : frozenSystems.get(i.sessionID);
      if (!system) {
        const model = i.model ? { providerID: i.model.providerID, modelID: i.model.id } : undefined;
        const resp = await call("/v1/opencode/system", {
          session: i.sessionID,
          system: o.system,
          model,
          tools: toolIds.size ? [...toolIds] : undefined,
          history: takeHistory(i.sessionID),
          turn: lastUser.get(i.sessionID),
        });
        // A cancel skips the LLM call: opencode 1.18 lets a plugin do that only by failing the
        // request, so the turn ends with this text as its error.
        if (resp && typeof resp.cancel === "string" && resp.cancel) throw new Error(resp.cancel);
        if (resp && Array.isArray(resp.system) && resp.system.length) {
          system = resp.system;
          if (resp.cacheable && !own) frozenSystems.set(i.sessionID, system);
        }
      }
      const extra = own ? undefined : turnSystems.get(i.sessionID);
      if (!own) turnSystems.delete(i.sessionID);
      if (system) {
        o.system.length = 0;
        o.system.push(...system);
      }
      if (extra) o.system.push(...extra); // this request only
    },

    // opencode awaits this at the end of each text part of a response and stores the text it is given
    // back: awaited only when a hook handles after_turn, whose `text` replaces the stored text (what
    // opencode streamed to the screen stays shown).
    "experimental.text.complete": async (i, o) => {
      if (!handled.has("after_turn") || !i?.sessionID || !i?.messageID || typeof o?.text !== "string") return;
      const resp = await call("/v1/opencode/text-complete", {
        session: i.sessionID,
        message: { id: i.messageID, ...(messageKind.get(i.messageID) || {}) },
        part: i.partID,
        text: o.text,
        parts: [...(messageParts.get(i.messageID)?.values() || [])],
        turn: turnOf.get(i.messageID),
      });
      if (resp && typeof resp.text === "string") o.text = resp.text;
    },

    "experimental.session.compacting": async (i, o) => {
      const resp = await call("/v1/opencode/compacting", {
        session: i?.sessionID,
        prompt: typeof o?.prompt === "string" ? o.prompt : undefined,
        history: takeHistory(i?.sessionID),
      });
      if (resp && typeof resp.prompt === "string" && resp.prompt) o.prompt = resp.prompt;
    },

    "tool.execute.before": async (i, o) => {
      const body = {
        session: i?.sessionID,
        tool: i?.tool,
        call_id: i?.callID,
        args: o?.args,
        own: toolSpecs.has(i?.tool),
        history: takeHistory(i?.sessionID),
      };
      // The tool waits only when a hook handles before_tool; otherwise the engine just records it.
      if (!handled.has("before_tool")) return fire("/v1/opencode/tool-before", body);
      const resp = await call("/v1/opencode/tool-before", { ...body, wait: true });
      // Throwing refuses the call: the model receives the reason as the tool's result.
      if (resp && typeof resp.deny === "string") throw new Error(resp.deny);
      if (resp && resp.args && typeof resp.args === "object" && o && o.args && typeof o.args === "object") {
        for (const key of Object.keys(o.args)) delete o.args[key];
        Object.assign(o.args, resp.args);
      }
    },

    "tool.execute.after": async (i, o) => {
      const body = { session: i?.sessionID, tool: i?.tool, call_id: i?.callID, title: o?.title, output: o?.output };
      if (!handled.has("after_tool")) return fire("/v1/opencode/tool-after", body);
      // after_tool gets the arguments the tool received (the engine knows them already otherwise).
      const resp = await call("/v1/opencode/tool-after", { ...body, args: i?.args, wait: true });
      if (resp && typeof resp.result === "string" && o) o.output = resp.result;
    },

    "tool.definition": async (i, o) => {
      if (i?.toolID) toolIds.add(i.toolID);
      const spec = toolSpecs.get(i?.toolID);
      if (spec) {
        o.jsonSchema = spec.parameters;
        if (spec.description) o.description = spec.description;
      }
      if (i?.toolID) noteOffered(i.toolID, o);
    },

    dispose: async () => {
      forget();
      // The engine's way into opencode closes first: a request of the engine's that reached opencode
      // after this would make opencode create the directory's instance again, with a new shim.
      try {
        proxy?.server?.stop?.(true);
      } catch {}
      // `opencode run` ends here: let forwarded work reach the engine (bounded), then say goodbye.
      await Promise.race([Promise.allSettled([...inflight]), new Promise((r) => setTimeout(r, 5000))]);
      if (engine && connectionId && !engineDown) {
        await request("/v1/opencode/disconnect", { id: connectionId }, { timeoutMs: 2000 }).catch(() => {});
      }
    },
  };

  this.init = async () => {
    // Never await opencode's own API here: opencode is still initialising and would deadlock.
    proxy = startProxy();
    try {
      await connect();
      const list = await request("/v1/tools", null, { method: "GET" });
      const tool = {};
      for (const spec of list.tools || []) {
        toolSpecs.set(spec.name, spec);
        tool[spec.name] = makeTool(spec);
      }
      hooks.tool = tool;
      log("info", `evolve ${SHIM_VERSION}: ${toolSpecs.size} tools from the engine for ${workspace}`);
    } catch (err) {
      engineDown = true;
      log("error", `evolve engine unavailable at start (${err.message}); opencode runs without evolve tools, hooks retry on each call`);
    }
    initDone = true;
    return hooks;
  };
}
