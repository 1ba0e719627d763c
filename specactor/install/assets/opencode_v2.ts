// specactor: installed by `specactor install opencode --opencode-plugin v2`; `specactor uninstall opencode`
// removes this file. OpenCode 2.x plugin (@opencode/plugin). The session "context" hook runs on every
// model call, compaction included: it adds specactor's session context (accepted constraints first,
// then this project's relevant memories), the same text for the whole session, and none to subagent
// sessions. After a file edit, the knowledge constraint check's findings are appended to the tool's
// output. It runs the `specactor` command; every failure or timeout adds nothing (fail open).
import { spawn } from "node:child_process"
import { Plugin } from "@opencode/plugin"

const SPECACTOR_COMMAND = "specactor"
const CONTEXT_TIMEOUT_MS = 4000
const CHECK_TIMEOUT_MS = 8000
const WRITE_TOOLS = new Set(["edit", "write", "multiedit", "patch", "apply_patch"])

function run(args: string[], cwd: string, input: string, timeoutMs: number): Promise<string> {
  return new Promise((resolve) => {
    let out = ""
    let settled = false
    let timer: ReturnType<typeof setTimeout> | undefined
    const finish = (text: string) => {
      if (settled) return
      settled = true
      if (timer) clearTimeout(timer)
      resolve(text)
    }
    let child: any
    try {
      child = spawn(SPECACTOR_COMMAND, args, { cwd, stdio: ["pipe", "pipe", "ignore"] })
    } catch {
      finish("")
      return
    }
    timer = setTimeout(() => {
      child.kill()
      finish("")
    }, timeoutMs)
    child.stdout.setEncoding("utf8")
    child.stdout.on("data", (chunk: string) => {
      out += chunk
    })
    child.on("error", () => finish(""))
    child.on("close", (code: number | null) => finish(code === 0 ? out.trim() : ""))
    child.stdin.on("error", () => {})
    child.stdin.end(input)
  })
}

function contextOf(printed: string): string {
  if (!printed.startsWith("{")) return printed
  try {
    const answer = JSON.parse(printed)
    const text = answer?.hookSpecificOutput?.additionalContext ?? answer?.additionalContext
    return typeof text === "string" ? text : ""
  } catch {
    return printed
  }
}

export default Plugin.define({
  id: "specactor",
  async setup(ctx: any) {
    const directory: string = ctx.directory ?? ctx.project?.directory ?? process.cwd()
    const contexts = new Map<string, Promise<string>>()

    await ctx.session.hook("context", async (e: any) => {
      const session = e?.session ?? {}
      const sessionID: string | undefined = e?.sessionID ?? session.id
      if (!sessionID || session.parentID || e?.parentID) return
      let text = contexts.get(sessionID)
      if (text === undefined) {
        text = run(["context", "--root", directory], directory, "", CONTEXT_TIMEOUT_MS)
        contexts.set(sessionID, text)
      }
      const context = await text
      if (context) e.system.push({ type: "text", text: context })
    })

    await ctx.tool.hook("execute.after", async (e: any) => {
      const tool = String(e?.tool ?? e?.name ?? "")
      if (!WRITE_TOOLS.has(tool.toLowerCase())) return
      const payload = JSON.stringify({
        session_id: e?.sessionID ?? e?.session?.id,
        cwd: directory,
        hook_event_name: "PostToolUse",
        tool_name: tool,
        tool_input: e?.args ?? e?.input ?? {},
      })
      const report = contextOf(await run(["hook", "tool-use", "--client", "opencode"], directory, payload,
                                         CHECK_TIMEOUT_MS))
      if (report && typeof e.output === "string") e.output = `${e.output}\n\n${report}`
    })
  },
})
