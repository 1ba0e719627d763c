// The TS SDK peer: the official TypeScript MCP SDK (@modelcontextprotocol/sdk, pinned in
// package.json) serving the bench's `echo` and `add` tools with the Python SDK peer's replies.
//
//     node server.mjs                              stdio (StdioServerTransport)
//     node server.mjs --http --port 0              Streamable HTTP, sessions: the SDK's documented
//                                                  pattern, transports kept in a map by session id
//     node server.mjs --http --stateless --port 0  Streamable HTTP, stateless: the documented pattern,
//                                                  a new server and transport per request
//
// Over HTTP both use the SDK's own `createMcpExpressApp()` (express 5, JSON body parser, Host
// header check on 127.0.0.1) and plain JSON replies (`enableJsonResponse: true`, as specactor
// and the Python SDK peer send a ready reply). The port is announced on stderr as a JSON line
// shaped like specactor's (`{"msg": "ts-sdk-peer started", "urls": [...]}`); SIGTERM or SIGINT
// exits 0; over stdio, EOF on stdin ends it (exit 0) once its replies are written.
//
// The tools mirror bench/peers/sdk_server.py: `echo {text}` answers content [{type: text, text}]
// and structuredContent {result: text}, `add {a, b}` the sum; both declare an output schema, as
// the Python SDK derives one from the return type. This file is run from <repo>/.bench/ts-peer,
// where bench/peers/ts/project.py copies it next to the installed node_modules.
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';

import { createMcpExpressApp } from '@modelcontextprotocol/sdk/server/express.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import * as z from 'zod/v4';

// The tools' schemas are built once, not per server: the stateless pattern builds a server per
// request, and fresh zod schemas each time cost it about 10% of its calls/s here (zod compiles a
// schema on its first parse). The SDK's example builds them in getServer(); this is its better case.
const ECHO = { description: 'Echo the text back.', inputSchema: { text: z.string() }, outputSchema: { result: z.string() } };
const ADD = {
    description: 'Add two numbers.',
    inputSchema: { a: z.number(), b: z.number() },
    outputSchema: { result: z.number() }
};

function getServer() {
    const server = new McpServer({ name: 'ts-sdk-peer', version: '1.32.2' });
    server.registerTool('echo', ECHO, async ({ text }) => ({
        content: [{ type: 'text', text }],
        structuredContent: { result: text }
    }));
    server.registerTool('add', ADD, async ({ a, b }) => ({
        content: [{ type: 'text', text: String(a + b) }],
        structuredContent: { result: a + b }
    }));
    return server;
}

function rpcError(res, status, message) {
    res.status(status).json({ jsonrpc: '2.0', error: { code: -32000, message }, id: null });
}

// The SDK's stateless example: every POST gets its own server and transport, closed with the response.
function stateless(app) {
    app.post('/mcp', async (req, res) => {
        const server = getServer();
        const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
        res.on('close', () => {
            transport.close();
            server.close();
        });
        try {
            await server.connect(transport);
            await transport.handleRequest(req, res, req.body);
        } catch (error) {
            console.error(error);
            if (!res.headersSent) rpcError(res, 500, 'Internal server error');
        }
    });
    const notAllowed = (req, res) => rpcError(res, 405, 'Method not allowed.');
    app.get('/mcp', notAllowed);
    app.delete('/mcp', notAllowed);
}

// The SDK's session example: initialize creates a transport (and a server), kept by session id until closed.
function sessions(app) {
    const transports = new Map();
    app.post('/mcp', async (req, res) => {
        const sid = req.headers['mcp-session-id'];
        let transport = sid === undefined ? undefined : transports.get(sid);
        try {
            if (transport === undefined) {
                if (sid !== undefined || !isInitializeRequest(req.body)) {
                    rpcError(res, 400, 'Bad Request: No valid session ID provided');
                    return;
                }
                const created = new StreamableHTTPServerTransport({
                    sessionIdGenerator: () => randomUUID(),
                    enableJsonResponse: true,
                    onsessioninitialized: id => transports.set(id, created)
                });
                created.onclose = () => {
                    if (created.sessionId !== undefined) transports.delete(created.sessionId);
                };
                await getServer().connect(created);
                transport = created;
            }
            await transport.handleRequest(req, res, req.body);
        } catch (error) {
            console.error(error);
            if (!res.headersSent) rpcError(res, 500, 'Internal server error');
        }
    });
    const bySession = async (req, res) => {
        const transport = transports.get(req.headers['mcp-session-id']);
        if (transport === undefined) {
            rpcError(res, 400, 'Invalid or missing session ID');
            return;
        }
        await transport.handleRequest(req, res);
    };
    app.get('/mcp', bySession);
    app.delete('/mcp', bySession);
}

function serveHttp(host, port, isStateless) {
    const app = createMcpExpressApp({ host });
    (isStateless ? stateless : sessions)(app);
    const listener = app.listen(port, host, error => {
        if (error) {
            console.error(error);
            process.exit(1);
        }
        const url = `http://${host}:${listener.address().port}/mcp`;
        console.error(JSON.stringify({ msg: 'ts-sdk-peer started', mode: isStateless ? 'stateless' : 'sessions', urls: [url] }));
    });
    for (const signal of ['SIGTERM', 'SIGINT']) {
        process.on(signal, () => {
            listener.close();
            process.exit(0);
        });
    }
}

async function serveStdio() {
    const server = getServer();
    await server.connect(new StdioServerTransport());
}

const { values } = parseArgs({
    options: {
        http: { type: 'boolean', default: false },
        stateless: { type: 'boolean', default: false },
        host: { type: 'string', default: '127.0.0.1' },
        port: { type: 'string', default: '0' }
    }
});
if (values.http) {
    serveHttp(values.host, Number(values.port), values.stateless);
} else {
    await serveStdio();
}
