/**
 * Starts the UI tests' Jupyter servers all at once and prints `vramscope-ui-servers: ready` on
 * stdout when every one of them answers its URL (playwright.config.ts runs this as its one
 * `webServer`): Playwright starts the servers of a `webServer` list one after another, each
 * polled up to a second apart, ~4 s of mostly one core each on a 2-core machine.
 *
 * The servers come from VRAMSCOPE_UI_SERVERS, a JSON list of
 * `{ name, command, cwd, url, env }` (`env` is added to this process's environment). They are
 * children of this process, in its process group, which Playwright kills after the run; their
 * stderr is passed on, each line prefixed with the server's name. A server that exits ends
 * them all, this process included, so the run stops instead of waiting for it.
 */
import { spawn } from 'child_process';
import http from 'http';

const READY = 'vramscope-ui-servers: ready';
const servers = JSON.parse(process.env.VRAMSCOPE_UI_SERVERS || '[]');
if (!servers.length) {
  console.error('servers.mjs: VRAMSCOPE_UI_SERVERS lists no server');
  process.exit(2);
}

/** Whether `url` answers as Playwright counts it (2xx, 3xx, 400-403). */
const answers = url =>
  new Promise(resolve => {
    const request = http.get(url, response => {
      response.resume();
      const status = response.statusCode ?? 0;
      resolve(status >= 200 && status < 404);
    });
    request.on('error', () => resolve(false));
    request.setTimeout(2000, () => {
      request.destroy();
      resolve(false);
    });
  });

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

// Something else answering a server's URL would pass for it.
for (const server of servers) {
  if (await answers(server.url)) {
    console.error(
      `servers.mjs: ${server.url} is already used (${server.name})`
    );
    process.exit(1);
  }
}

for (const server of servers) {
  const child = spawn(server.command, {
    shell: true,
    cwd: server.cwd,
    env: { ...process.env, ...server.env },
    stdio: ['ignore', 'ignore', 'pipe']
  });
  let partial = ''; // of a line, until its end comes
  child.stderr.on('data', data => {
    const lines = (partial + data.toString()).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) {
      process.stderr.write(`[${server.name}] ${line}\n`);
    }
  });
  child.on('exit', (code, signal) => {
    console.error(
      `servers.mjs: ${server.name} exited (${signal ?? `status ${code}`}): ending the others`
    );
    // The whole process group, this process included: Playwright, which sees this process
    // end, no longer kills the group, and the other servers would be left running.
    process.kill(0, 'SIGKILL');
  });
}

await Promise.all(
  servers.map(async server => {
    while (!(await answers(server.url))) {
      await sleep(100);
    }
  })
);
console.log(READY);
// Then it stays, with its children, until Playwright ends the process group.
