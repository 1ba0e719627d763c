// specactor: installed by `specactor install opencode`; `specactor uninstall opencode` removes this file.
// OpenCode V1 plugin (@opencode-ai/plugin). It puts specactor's session context (accepted constraints
// first, then this project's relevant memories) into the system prompt, checks each edited file
// against the knowledge constraints, and keeps the context through compaction. It runs the
// `specactor` command; every failure or timeout adds nothing (fail open). No npm imports: it loads
// offline.
import { spawn } from "node:child_process"
import type { Plugin } from "@opencode-ai/plugin"

const SPECACTOR_COMMAND = "specactor"
const CONTEXT_TIMEOUT_MS = 4000 // `specactor context` on a large store takes ~0.3 s
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

// What a hook printed, as text: plain text as is, a Claude-style JSON answer by its additionalContext.
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

export const SpecactorPlugin: Plugin = async ({ client, directory }: any) => {
  // One context per session, computed once: every model request of the session gets the same text
  // (stable prompt caching), and subagent sessions (those with a parentID) get none.
  const contexts = new Map<string, Promise<string>>()
  const subagent = new Map<string, boolean>()

  const isSubagent = async (sessionID: string): Promise<boolean> => {
    const known = subagent.get(sessionID)
    if (known !== undefined) return known
    let parent = false
    try {
      const found: any = await client?.session?.get?.({ path: { id: sessionID } })
      parent = Boolean(found?.data?.parentID ?? found?.parentID)
    } catch {
      parent = false
    }
    subagent.set(sessionID, parent)
    return parent
  }

  const contextFor = (sessionID: string): Promise<string> => {
    let text = contexts.get(sessionID)
    if (text === undefined) {
      text = run(["context", "--root", directory], directory, "", CONTEXT_TIMEOUT_MS)
      contexts.set(sessionID, text)
    }
    return text
  }

  return {
    event: async ({ event }: any) => {
      const info = event?.properties?.info
      if (!info?.id) return
      if (event.type === "session.created") subagent.set(info.id, Boolean(info.parentID))
      if (event.type === "session.deleted") {
        subagent.delete(info.id)
        contexts.delete(info.id)
      }
    },

    "experimental.chat.system.transform": async (input: any, output: any) => {
      const sessionID = input?.sessionID
      if (!sessionID || (await isSubagent(sessionID))) return
      const text = await contextFor(sessionID)
      if (text) output.system.push(text)
    },

    "tool.execute.after": async (input: any, output: any) => {
      if (!WRITE_TOOLS.has(String(input?.tool ?? "").toLowerCase())) return
      const payload = JSON.stringify({
        session_id: input.sessionID,
        cwd: directory,
        hook_event_name: "PostToolUse",
        tool_name: input.tool,
        tool_input: input.args ?? {},
        tool_response: { title: output?.title, metadata: output?.metadata },
      })
      const report = contextOf(await run(["hook", "tool-use", "--client", "opencode"], directory, payload,
                                         CHECK_TIMEOUT_MS))
      if (report) output.output = `${output.output ?? ""}\n\n${report}`
    },

    "experimental.session.compacting": async (input: any, output: any) => {
      const sessionID = input?.sessionID
      if (!sessionID || (await isSubagent(sessionID))) return
      const text = await contextFor(sessionID)
      if (text) output.context.push(text)
    },
  }
}
