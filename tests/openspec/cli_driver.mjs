// Runs OpenSpec CLI commands in one Node process, so differential tests need not pay Node's
// start-up (~0.8 s) per command. Each request line is {"cwd", "command", "args", "options"};
// the reply line is {"stdout", "exitCode"}. The action bodies mirror dist/cli/index.js 1.13.2
// (list, show, validate, archive), minus commander's argv parsing.
import { createInterface } from 'node:readline';
import path from 'node:path';
import { existsSync } from 'node:fs';

const dist = process.argv[2];
const load = (rel) => import(path.join(dist, rel));
const { ListCommand } = await load('core/list.js');
const { ArchiveCommand } = await load('core/archive.js');
const { ShowCommand } = await load('commands/show.js');
const { ValidateCommand } = await load('commands/validate.js');
const { resolveRootForCommand, toRootOutput } = await load('core/root-selection.js');
const { asStatus } = await load('commands/shared-output.js');

class Exit extends Error {}
process.exit = (code) => { throw new Exit(String(code)); };

function failWithError(error, json) {
  if (error instanceof Exit) return;
  if (json?.enabled) {
    console.log(JSON.stringify({ ...(json.payload ?? {}), status: [asStatus(error, json.fallbackCode ?? 'command_error')] }, null, 2));
    process.exitCode = 1;
    return;
  }
  console.log(JSON.stringify({ status: [{ severity: 'error', code: 'crash', message: String(error?.message) }] }));
  process.exitCode = 1;
}

const actions = {
  async list(_, options) {
    try {
      const root = await resolveRootForCommand(options, {
        json: true, failurePayload: options.specs ? { specs: [], root: null } : { changes: [], root: null },
        allowImplicitRoot: existsSync(path.join(process.cwd(), 'openspec', 'project.md')),
      });
      if (!root) return;
      await new ListCommand().execute(root.path, options.specs ? 'specs' : 'changes',
        { sort: options.sort === 'name' ? 'name' : 'recent', json: true, root: toRootOutput(root) });
    } catch (error) {
      failWithError(error, { enabled: true, payload: options.specs ? { specs: [], root: null } : { changes: [], root: null }, fallbackCode: 'list_error' });
    }
  },
  async show(item, options) {
    try { await new ShowCommand().execute(item, options); }
    catch (error) { failWithError(error, { enabled: true, fallbackCode: 'show_error' }); }
  },
  async validate(item, options) {
    try { await new ValidateCommand().execute(item, options); }
    catch (error) { failWithError(error, { enabled: true, fallbackCode: 'validate_error' }); }
  },
  async archive(item, options) {
    try { await new ArchiveCommand().execute(item, options); }
    catch (error) { failWithError(error); }
  },
};

const rl = createInterface({ input: process.stdin });
const write = process.stdout.write.bind(process.stdout);
for await (const line of rl) {
  const req = JSON.parse(line);
  const out = [];
  const log = console.log, err = console.error, warn = console.warn;
  console.log = (...a) => out.push(a.join(' '));
  console.error = () => {};
  console.warn = () => {};
  process.exitCode = undefined;
  try {
    process.chdir(req.cwd);
    await actions[req.command](req.args[0], { json: true, interactive: false, ...req.options });
  } catch (error) {
    if (!(error instanceof Exit)) out.push(JSON.stringify({ status: [{ code: 'driver_crash', message: String(error?.stack) }] }));
  } finally {
    console.log = log; console.error = err; console.warn = warn;
  }
  write(JSON.stringify({ stdout: out.join('\n'), exitCode: process.exitCode ?? 0 }) + '\n');
}
